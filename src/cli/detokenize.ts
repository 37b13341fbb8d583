import { openGguf } from "../gguf/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import { type Command, EXIT_OK, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";

const HELP = `usage: neuron detokenize --model FILE [--skip-special] IDS...

Prints the text of token ids (separated by commas or spaces, in one or more arguments),
byte for byte with no newline added. Control tokens print their text unless skipped.
Reads only the file's metadata.

  -m, --model FILE    GGUF model (or vocabulary) file
      --skip-special  leave out control tokens (<|im_end|>, ...)
  -h, --help          this text`;

export const detokenizeCommand: Command = {
  summary: "print the text of token ids",
  async run(args: string[]): Promise<number> {
    const parsed = parseFlags({
      args,
      strict: true,
      allowPositionals: true,
      options: {
        model: { type: "string", short: "m" },
        "skip-special": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    const { values, positionals } = parsed;
    if (values.help) {
      console.log(HELP);
      return EXIT_OK;
    }
    if (values.model === undefined) throw new UsageError("detokenize: --model is required");
    const words = positionals.join(" ").split(/[\s,]+/).filter((w) => w !== "");
    if (words.length === 0) throw new UsageError("detokenize: expected token ids");
    const ids = words.map((w) => {
      if (!/^\d+$/.test(w)) throw new UsageError(`detokenize: "${w}" is not a token id`);
      return Number(w);
    });

    const file = openGguf(values.model);
    try {
      const tokenizer = loadTokenizer(file);
      const text = tokenizer.decode(ids, { skipSpecial: values["skip-special"] ?? false });
      const bytes = new TextEncoder().encode(text);
      let written = 0;
      while (written < bytes.length) written += await Deno.stdout.write(bytes.subarray(written));
    } finally {
      file.close();
    }
    return EXIT_OK;
  },
};
