import { NeuronError } from "../common/errors.ts";

/**
 * A neuron.toml (or `NEURON_*` override) that cannot be used. The message is one line that
 * starts with the file (or variable) and the key path, so an operator can fix it from the
 * journal alone: `neuron.toml: harness.native.threads: expected number, got string`.
 */
export class ConfigError extends NeuronError {
  constructor(message: string, options?: ErrorOptions) {
    super("config_invalid", message, options);
  }
}
