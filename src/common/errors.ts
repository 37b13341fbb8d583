/**
 * The root of every error neuron raises on purpose. `code` is stable and machine-readable
 * (it reaches HTTP clients and worker protocols); `message` is for people. Each folder
 * defines its own subclasses with a fixed set of codes (GgufError, ConfigError, ...).
 */
export class NeuronError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Formats any thrown value as one line, for logs and error bodies. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
