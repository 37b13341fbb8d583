/**
 * The names a loaded model answers to besides its id: the `model_id` spelling it was loaded
 * with when that was not its canonical path (`a/../a/x.gguf`), and its `served_name`
 * (llama-server's `--alias`, vLLM's `--served-model-name`). Requests, endpoint lookups and
 * unloads may use any of them.
 */

import { HarnessError } from "../errors.ts";

export class ModelNames {
  /** Other name -> model id. */
  readonly #ids = new Map<string, string>();

  /** The id `name` stands for: itself when it is no other model's name. */
  resolve(name: string): string {
    return this.#ids.get(name) ?? name;
  }

  /**
   * Refuses `served` as a name of model `id` when it already names another model or is
   * another model's id (`isId`).
   */
  check(served: string | null | undefined, id: string, isId: (name: string) => boolean): void {
    if (served === undefined || served === null || served === id) return;
    const taken = this.#ids.get(served);
    if ((taken !== undefined && taken !== id) || isId(served)) {
      throw new HarnessError(
        "served_name_taken",
        `served_name ${JSON.stringify(served)} already names another model (${taken ?? served})`,
      );
    }
  }

  /** Makes each of `names` (those that differ from `id`) stand for `id`. */
  add(id: string, names: Array<string | null | undefined>): void {
    for (const n of names) if (n && n !== id) this.#ids.set(n, id);
  }

  /** Forgets every name of `id`. */
  forget(id: string): void {
    for (const [name, target] of this.#ids) if (target === id) this.#ids.delete(name);
  }
}
