import { NeuronError } from "../common/errors.ts";

export type ModelErrorCode =
  | "unsupported_architecture"
  | "bad_tensor_shape"
  | "bad_hparams"
  | "unsupported_pooling"
  | "unsupported_attention";

/** A model file whose architecture or tensors neuron cannot run. */
export class ModelError extends NeuronError {
  override readonly code: ModelErrorCode;

  constructor(code: ModelErrorCode, message: string) {
    super(code, message);
    this.code = code;
  }
}

/** A model that cannot be split as asked; the message says which tensor or count and why. */
export class ShardError extends NeuronError {
  declare readonly code: "unshardable";

  constructor(message: string) {
    super("unshardable", message);
  }
}
