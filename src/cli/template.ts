import { errorMessage } from "../common/errors.ts";
import { openGguf } from "../gguf/mod.ts";
import { ChatError, chatTemplateFromGguf, parseMessages, parseTools } from "../chat/mod.ts";
import { addedSpecials } from "../frontend/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import { type Command, EXIT_OK, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";

const HELP = `usage: neuron template --model FILE --messages FILE.json [--tools FILE.json]
                       [--kwargs JSON] [--no-generation-prompt]

Renders a conversation with the model's chat template and prints the prompt byte for byte
(no newline added). The messages file holds an array of OpenAI chat messages, or a request
body with "messages" (and optionally "tools" and "chat_template_kwargs"). - reads standard
input. Reads only the file's metadata.

  -m, --model FILE            GGUF model file
      --messages FILE         messages (or request body) as JSON
      --tools FILE            OpenAI tools as JSON (overrides the body's)
      --kwargs JSON           chat_template_kwargs, e.g. '{"enable_thinking": false}'
      --no-generation-prompt  do not open the assistant's turn at the end
  -h, --help                  this text`;

async function readJson(path: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = path === "-"
      ? await new Response(Deno.stdin.readable).text()
      : await Deno.readTextFile(path);
  } catch (err) {
    throw new UsageError(`template: cannot read ${what} ${path}: ${errorMessage(err)}`);
  }
  return parseJson(text, `${what} ${path}`);
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`template: ${what} is not JSON: ${errorMessage(err)}`);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export const templateCommand: Command = {
  summary: "print a conversation rendered with the model's chat template",
  async run(args: string[]): Promise<number> {
    const parsed = parseFlags({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        model: { type: "string", short: "m" },
        messages: { type: "string" },
        tools: { type: "string" },
        kwargs: { type: "string" },
        "no-generation-prompt": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    const { values } = parsed;
    if (values.help) {
      console.log(HELP);
      return EXIT_OK;
    }
    if (values.model === undefined) throw new UsageError("template: --model is required");
    if (values.messages === undefined) throw new UsageError("template: --messages is required");

    const body = await readJson(values.messages, "messages");
    const request = isRecord(body) ? body : { messages: body };
    const tools = values.tools === undefined
      ? request.tools
      : await readJson(values.tools, "tools");
    const kwargs = values.kwargs === undefined
      ? request.chat_template_kwargs
      : parseJson(values.kwargs, "--kwargs");
    if (kwargs !== undefined && !isRecord(kwargs)) {
      throw new ChatError("invalid_request", "chat_template_kwargs must be a JSON object");
    }

    const file = openGguf(values.model);
    try {
      const template = chatTemplateFromGguf(file, addedSpecials(loadTokenizer(file)));
      const prompt = template.render(parseMessages(request.messages), {
        tools: tools === undefined || tools === null ? undefined : parseTools(tools),
        kwargs,
        addGenerationPrompt: !values["no-generation-prompt"],
      });
      const bytes = new TextEncoder().encode(prompt);
      let written = 0;
      while (written < bytes.length) written += await Deno.stdout.write(bytes.subarray(written));
    } finally {
      file.close();
    }
    return EXIT_OK;
  },
};
