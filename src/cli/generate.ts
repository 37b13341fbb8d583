import { errorMessage } from "../common/errors.ts";
import { GREEDY } from "../engine/mod.ts";
import type { GenerateRequest, GenerationEvent, Prompt } from "../frontend/mod.ts";
import { ModelSession } from "../harness/native/model_session.ts";
import { parseMessages } from "../chat/mod.ts";
import { type Command, countFlag, EXIT_OK, EXIT_RUNTIME, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";
import { SpeedMeter } from "./speed.ts";

const HELP = `usage: neuron generate --model FILE (--tokens IDS | --prompt TEXT | --messages FILE)
                       [--max-tokens N] [--temperature T] [--seed S] [--top-logits K]
                       [--ignore-eos] [--device D] [--threads N] [--json]

Runs the model on one prompt and prints what it generates (the llama-simple of neuron).
Greedy unless --temperature is above 0. Stops at an end-of-generation token unless
--ignore-eos. The text goes to standard output as it is generated; then standard error
gets the top logits of each step (with --top-logits) and the prompt and generation
speeds in tokens/s.

  -m, --model FILE      GGUF model
      --tokens IDS      prompt as token ids, comma or space separated
  -p, --prompt TEXT     prompt as text (special tokens such as <|im_start|> are parsed)
      --messages FILE   chat messages (JSON array) rendered with the model's template
  -n, --max-tokens N    tokens to generate (default 32)
      --temperature T   sampling temperature (default 0: greedy)
      --seed S          sampling seed
      --top-logits K    also print each step's K best (id, logit), after the text
      --ignore-eos      keep going past end-of-generation tokens
      --device D        auto | cpu | cuda | reference (default auto)
  -t, --threads N       CPU threads (default: all cores)
      --json            print {"ids", "text", "steps": [{"id", "top"}]}
  -h, --help            this text`;

function promptFrom(values: { tokens?: string; prompt?: string; messages?: string }): Prompt {
  const given = [values.tokens, values.prompt, values.messages].filter((v) => v !== undefined);
  if (given.length !== 1) {
    throw new UsageError("generate: give exactly one of --tokens, --prompt, --messages");
  }
  if (values.tokens !== undefined) {
    const ids = values.tokens.split(/[\s,]+/).filter((s) => s !== "").map(Number);
    if (ids.some((id) => !Number.isInteger(id) || id < 0)) {
      throw new UsageError("generate: --tokens must be non-negative integers");
    }
    return { kind: "tokens", ids };
  }
  if (values.prompt !== undefined) return { kind: "text", text: values.prompt };
  let json: unknown;
  try {
    json = JSON.parse(Deno.readTextFileSync(values.messages!));
  } catch (err) {
    throw new UsageError(`generate: cannot read --messages: ${errorMessage(err)}`);
  }
  return { kind: "messages", messages: parseMessages(json) };
}

export const generateCommand: Command = {
  summary: "generate text from a prompt with a local model",
  async run(args: string[]): Promise<number> {
    const parsed = parseFlags({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        model: { type: "string", short: "m" },
        tokens: { type: "string" },
        prompt: { type: "string", short: "p" },
        messages: { type: "string" },
        "max-tokens": { type: "string", short: "n" },
        temperature: { type: "string" },
        seed: { type: "string" },
        "top-logits": { type: "string" },
        "ignore-eos": { type: "boolean" },
        device: { type: "string" },
        threads: { type: "string", short: "t" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    const { values } = parsed;
    if (values.help) {
      console.log(HELP);
      return Promise.resolve(EXIT_OK);
    }
    if (values.model === undefined) throw new UsageError("generate: --model is required");
    const device = values.device ?? "auto";
    if (!["auto", "cpu", "cuda", "reference"].includes(device)) {
      throw new UsageError(`generate: unknown device "${device}"`);
    }
    const temperature = values.temperature === undefined ? 0 : Number(values.temperature);
    if (!(temperature >= 0)) throw new UsageError("generate: --temperature must be >= 0");
    const prompt = promptFrom(values);
    const maxTokens = countFlag("generate", "--max-tokens", values["max-tokens"], 32);
    const request: GenerateRequest = {
      id: "cli",
      prompt,
      maxTokens,
      sampling: {
        ...GREEDY,
        temperature,
        seed: values.seed === undefined
          ? undefined
          : countFlag("generate", "--seed", values.seed, 0),
      },
      ignoreEos: values["ignore-eos"] ?? false,
      topLogits: countFlag("generate", "--top-logits", values["top-logits"], 0),
      parseOutput: false,
    };

    const session = ModelSession.open({
      modelPath: values.model,
      device: device as "auto",
      threads: countFlag("generate", "--threads", values.threads, 0),
      contextLength: 0,
      maxSequences: 1,
      maxBatchTokens: 512,
      kvDtype: "f16",
    });
    try {
      return await run(session, request, values.json ?? false);
    } finally {
      session.close();
    }
  },
};

async function run(
  session: ModelSession,
  request: GenerateRequest,
  json: boolean,
): Promise<number> {
  const ids: number[] = [];
  const steps: Array<{ id: number; top: Array<[number, number]> }> = [];
  let text = "";
  let failure: string | null = null;
  const encoder = new TextEncoder();
  const speed = new SpeedMeter();
  const onEvent = (ev: GenerationEvent): void => {
    speed.observe(ev, performance.now());
    if (ev.type === "delta") {
      for (const t of ev.tokens) {
        ids.push(t.id);
        steps.push({ id: t.id, top: t.topLogits ?? [] });
      }
      const piece = ev.content ?? "";
      text += piece;
      if (!json && piece) Deno.stdout.writeSync(encoder.encode(piece));
    } else if (ev.type === "done" && ev.fault) {
      failure = `${ev.fault.code}: ${ev.fault.message}`;
    }
  };
  speed.accepted(await session.submit(request, onEvent), performance.now());
  while (session.hasWork) session.step();
  if (failure !== null) {
    console.error(`neuron: ${failure}`);
    return EXIT_RUNTIME;
  }
  if (json) console.log(JSON.stringify({ ids, text, steps }));
  else {
    Deno.stdout.writeSync(encoder.encode("\n"));
    // After the text, not as they come: on a terminal both streams share one screen, and
    // a step's line would cut the text mid-word.
    if (request.topLogits) {
      steps.forEach((step, i) => {
        const top = step.top.map(([id, l]) => `${id}:${l.toFixed(4)}`).join(" ");
        console.error(`step ${i}: ${step.id} | ${top}`);
      });
    }
  }
  for (const line of speed.lines()) console.error(line);
  return EXIT_OK;
}
