/**
 * A step deadline that reaches a thread blocked in native code: a native helper thread
 * (kernels/cpu/watchdog.c) calls the communicator's abort function by name once the armed
 * time passes. The blocked collective then returns with an error on every rank.
 */

import { TpError } from "./errors.ts";
import { cString, tpLibrary } from "./native.ts";

export class Watchdog {
  #handle: Deno.PointerValue;

  private constructor(handle: Deno.PointerObject) {
    this.#handle = handle;
  }

  /** Calls `symbol(target)` of the loaded `library` when a deadline expires. */
  static create(library: string, symbol: string, target: Deno.PointerObject): Watchdog {
    const h = tpLibrary().sym.nk_watchdog_create(cString(library), cString(symbol), target);
    if (h === null) {
      throw new TpError(
        "tp_unavailable",
        `cannot start a watchdog calling ${symbol} of ${library}`,
      );
    }
    return new Watchdog(h);
  }

  arm(timeoutMs: number): void {
    if (this.#handle === null) return;
    tpLibrary().sym.nk_watchdog_arm(this.#handle, BigInt(Math.max(0, Math.ceil(timeoutMs))));
  }

  disarm(): void {
    if (this.#handle !== null) tpLibrary().sym.nk_watchdog_disarm(this.#handle);
  }

  /** How many deadlines expired. */
  get fired(): number {
    return this.#handle === null ? 0 : tpLibrary().sym.nk_watchdog_fired(this.#handle);
  }

  /** Stops the thread (waiting for an abort call in progress). */
  close(): void {
    if (this.#handle === null) return;
    tpLibrary().sym.nk_watchdog_destroy(this.#handle);
    this.#handle = null;
  }
}
