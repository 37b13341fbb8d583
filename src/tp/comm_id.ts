/**
 * A communicator id: the 128 bytes every rank needs to join one group (NCCL's
 * ncclUniqueId, or our CPU communicator's own id), carried in `init` as 256 lowercase hex
 * characters.
 */

import { TpError } from "./errors.ts";

export const COMM_ID_BYTES = 128;

export function commIdToHex(id: Uint8Array): string {
  if (id.length !== COMM_ID_BYTES) {
    throw new TpError("bad_request", `a comm id is ${COMM_ID_BYTES} bytes, got ${id.length}`);
  }
  return Array.from(id, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The bytes of a hex comm id; `bad_request` naming what is wrong otherwise. */
export function commIdFromHex(hex: string): Uint8Array<ArrayBuffer> {
  if (hex.length !== 2 * COMM_ID_BYTES) {
    throw new TpError(
      "bad_request",
      `comm_id must be ${2 * COMM_ID_BYTES} hex characters, got ${hex.length}`,
    );
  }
  const bad = hex.search(/[^0-9a-fA-F]/);
  if (bad >= 0) {
    throw new TpError(
      "bad_request",
      `comm_id has a non-hex character ${JSON.stringify(hex[bad])} at ${bad}`,
    );
  }
  const out = new Uint8Array(COMM_ID_BYTES);
  for (let i = 0; i < COMM_ID_BYTES; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}
