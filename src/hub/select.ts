import { HubError } from "./errors.ts";

const SPLIT = /-\d{5}-of-\d{5}\.gguf$/i;

/**
 * The GGUF file `quant` picks among a repository's files (WIRE.md): the first `.gguf` whose
 * lower-cased name contains the lower-cased quant; without a quant, the only `.gguf`.
 * Refusals list the `.gguf` files there are, so the caller can correct the request.
 */
export function selectGguf(
  repo: string,
  files: string[],
  quant: string | null | undefined,
): string {
  const ggufs = files.filter((f) => f.toLowerCase().endsWith(".gguf"));
  const listing = ggufs.length ? ggufs.join(", ") : "none";
  if (ggufs.length === 0) {
    throw new HubError(
      "quant_not_found",
      `${repo} has no .gguf files (files: ${files.join(", ")})`,
    );
  }
  let chosen: string | undefined;
  if (quant) {
    const q = quant.toLowerCase();
    chosen = ggufs.find((f) => f.toLowerCase().includes(q));
    if (!chosen) {
      throw new HubError(
        "quant_not_found",
        `${repo} has no .gguf file for quant ${quant}; it has: ${listing}`,
      );
    }
  } else if (ggufs.length === 1) {
    chosen = ggufs[0];
  } else {
    throw new HubError(
      "quant_required",
      `${repo} has several .gguf files; choose one with quant: ${listing}`,
    );
  }
  if (SPLIT.test(chosen)) {
    throw new HubError(
      "split_gguf_unsupported",
      `${repo}: ${chosen} is one part of a split GGUF, which cannot be loaded; merge it first`,
    );
  }
  return chosen;
}
