import { openGguf } from "../gguf/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import { type Command, EXIT_OK, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";

const HELP = `usage: neuron tokenize --model FILE [--special] [--json] TEXT|-

Prints the token ids of TEXT (- reads standard input) as the model's tokenizer makes them,
one "ID<tab>PIECE" line per token (PIECE as a JSON string). BOS/EOS are added where the
vocabulary asks for them. Reads only the file's metadata.

  -m, --model FILE  GGUF model (or vocabulary) file
      --special     match special tokens written in the text (<|im_start|>, ...)
      --json        print {"ids": [...], "pieces": [...]} instead
  -h, --help        this text`;

export const tokenizeCommand: Command = {
  summary: "print the token ids of a text",
  async run(args: string[]): Promise<number> {
    const parsed = parseFlags({
      args,
      strict: true,
      allowPositionals: true,
      options: {
        model: { type: "string", short: "m" },
        special: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    const { values, positionals } = parsed;
    if (values.help) {
      console.log(HELP);
      return EXIT_OK;
    }
    if (values.model === undefined) throw new UsageError("tokenize: --model is required");
    if (positionals.length !== 1) {
      throw new UsageError("tokenize: expected one TEXT argument (or - for standard input)");
    }
    // A leading U+FEFF is text like any other (llama.cpp tokenizes it): TextDecoder's
    // default would drop it as a byte-order mark.
    const text = positionals[0] === "-"
      ? new TextDecoder("utf-8", { ignoreBOM: true }).decode(await readAll(Deno.stdin.readable))
      : positionals[0];

    const file = openGguf(values.model);
    try {
      const tokenizer = loadTokenizer(file);
      const ids = tokenizer.encode(text, {
        parseSpecial: values.special ?? false,
        addSpecial: true,
      });
      const decoder = new TextDecoder();
      const pieces = ids.map((id) => decoder.decode(tokenizer.tokenBytes(id, true)));
      const out = values.json
        ? JSON.stringify({ ids, pieces }) + "\n"
        : ids.map((id, i) => `${id}\t${JSON.stringify(pieces[i])}\n`).join("");
      await writeAll(new TextEncoder().encode(out));
    } finally {
      file.close();
    }
    return EXIT_OK;
  },
};

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function writeAll(bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) written += await Deno.stdout.write(bytes.subarray(written));
}
