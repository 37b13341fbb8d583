/** One `neuron <name>` subcommand. `run` returns the process exit code. */
export interface Command {
  summary: string;
  run(args: string[]): Promise<number>;
}

/** Exit codes shared by every command. */
export const EXIT_OK = 0;
export const EXIT_RUNTIME = 1;
export const EXIT_USAGE = 2;
