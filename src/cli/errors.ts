import { NeuronError } from "../common/errors.ts";

/** Bad command-line usage: exit code 2, message printed on one line. */
export class UsageError extends NeuronError {
  constructor(message: string) {
    super("usage", message);
  }
}
