import { errorMessage } from "../common/errors.ts";
import { versionLine } from "../common/version.ts";
import { ConfigError } from "../config/mod.ts";
import { type Command, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE } from "./command.ts";
import { UsageError } from "./errors.ts";
import { serveCommand } from "./serve.ts";
import { tokenizeCommand } from "./tokenize.ts";
import { detokenizeCommand } from "./detokenize.ts";
import { templateCommand } from "./template.ts";
import { generateCommand } from "./generate.ts";
import { benchCommand } from "./bench.ts";
import { workerCommand } from "./worker.ts";

/** Every subcommand, one line each; `neuron` alone (or with only flags) means `serve`. */
export const COMMANDS: Record<string, Command> = {
  serve: serveCommand,
  tokenize: tokenizeCommand,
  detokenize: detokenizeCommand,
  template: templateCommand,
  generate: generateCommand,
  bench: benchCommand,
};

export type { Command } from "./command.ts";
export { EXIT_OK, EXIT_RUNTIME, EXIT_USAGE } from "./command.ts";
export { UsageError } from "./errors.ts";

export function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) =>
    `  ${name.padEnd(width)}  ${c.summary}`
  );
  return [
    "neuron: inference node (GGUF models over an OpenAI-compatible API)",
    "",
    "usage: neuron [command] [options]      (no command: serve)",
    "       neuron --version | --help",
    "       neuron <command> --help",
    "",
    "commands:",
    ...lines,
  ].join("\n");
}

function fail(err: unknown): number {
  const usageLike = err instanceof UsageError || err instanceof ConfigError;
  console.error(`neuron: ${errorMessage(err).split("\n")[0]}`);
  return usageLike ? EXIT_USAGE : EXIT_RUNTIME;
}

/** Parses the first argument and runs the command it names; returns the exit code. */
export async function runCli(argv: string[]): Promise<number> {
  const dashDash = argv.indexOf("--");
  const flags = dashDash < 0 ? argv : argv.slice(0, dashDash);
  if (flags.includes("--worker")) {
    try {
      return await workerCommand.run(argv);
    } catch (err) {
      return fail(err);
    }
  }
  const first = argv[0];
  if (first === "--version" || first === "-V") {
    console.log(versionLine());
    return EXIT_OK;
  }
  if (first === "--help" || first === "-h" || first === "help") {
    console.log(usage());
    return EXIT_OK;
  }
  const named = first !== undefined && !first.startsWith("-");
  const name = named ? first : "serve";
  const command = COMMANDS[name];
  if (!command) {
    return fail(new UsageError(`unknown command "${name}" (see neuron --help)`));
  }
  try {
    return await command.run(named ? argv.slice(1) : argv);
  } catch (err) {
    return fail(err);
  }
}
