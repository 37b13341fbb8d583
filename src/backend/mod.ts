/** Backends: the device-specific implementations of the model ops, and their selection. */

import { NeuronError } from "../common/errors.ts";
import type { Backend } from "./backend.ts";
import { ReferenceBackend } from "./reference/reference_backend.ts";

export type * from "./backend.ts";

export interface BackendOptions {
  /** CPU threads (0 = all cores). */
  threads: number;
}

/** Builds the backend for `device`. */
export function createBackend(device: string, _options: BackendOptions): Backend {
  if (device === "reference") return new ReferenceBackend();
  throw new NeuronError("device_unavailable", `device '${device}' is not available in this build`);
}
