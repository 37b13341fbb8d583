import { HubError } from "./errors.ts";

/** A model in a repository: one `.gguf`, or every part of a split one, first part first. */
export interface GgufChoice {
  /** The file to open: the model itself, or its first part. */
  file: string;
  /** Every file to download: `[file]`, or all the parts in order. */
  parts: string[];
}

const PART = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** Files beside a model that are not one: vision projectors and importance matrices. */
function notAModel(path: string): boolean {
  const base = path.slice(path.lastIndexOf("/") + 1).toLowerCase();
  return base.includes("mmproj") || base.includes("imatrix");
}

interface Candidate extends GgufChoice {
  /** Parts of a split model absent from the files (1-based). */
  missing: number[];
  count: number;
}

/** The repository's models: single files and split sets, sorted by name. */
function models(ggufs: string[]): Candidate[] {
  const out: Candidate[] = [];
  const sets = new Map<string, { count: number; parts: Map<number, string> }>();
  for (const f of ggufs) {
    const m = PART.exec(f);
    if (!m) {
      out.push({ file: f, parts: [f], missing: [], count: 1 });
      continue;
    }
    const key = `${m[1]}\0${m[3]}`;
    const set = sets.get(key) ?? { count: Number(m[3]), parts: new Map() };
    set.parts.set(Number(m[2]), f);
    sets.set(key, set);
  }
  for (const { count, parts } of sets.values()) {
    const ordered = Array.from({ length: count }, (_, i) => parts.get(i + 1));
    const missing = ordered.flatMap((p, i) => (p === undefined ? [i + 1] : []));
    const present = ordered.filter((p): p is string => p !== undefined);
    // Named by its first part even when that one is missing, so the choice stays the same.
    const first = [...parts.values()][0].replace(
      PART,
      (_, prefix, _no, of) => `${prefix}-00001-of-${of}.gguf`,
    );
    out.push({ file: first, parts: present, missing, count });
  }
  return out.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
}

/** Whether `quant` stands alone in `name` (not inside a longer token: `f16` vs `bf16`). */
function wholeToken(name: string, quant: string): boolean {
  let at = name.indexOf(quant);
  while (at >= 0) {
    const before = name[at - 1] ?? "";
    const after = name[at + quant.length] ?? "";
    if (!/[a-z0-9_]/.test(before) && !/[a-z0-9_]/.test(after)) return true;
    at = name.indexOf(quant, at + 1);
  }
  return false;
}

/**
 * The model `quant` picks among a repository's files (WIRE.md): among the `.gguf` models
 * (vision projectors and importance matrices are not), those whose lower-cased path
 * contains the lower-cased quant, the ones where it stands as a whole token first, then by
 * name; without a quant, the only model. Split models are chosen whole. The order depends
 * on the names alone, so a cache's snapshot gives the same choice as the hub's listing.
 * Refusals list the models there are, so the caller can correct the request.
 */
export function selectGguf(
  repo: string,
  files: string[],
  quant: string | null | undefined,
): GgufChoice {
  const all = files.filter((f) => f.toLowerCase().endsWith(".gguf"));
  const candidates = models(all.filter((f) => !notAModel(f)));
  const skipped = all.filter(notAModel);
  const listing = (candidates.map((c) => c.file).join(", ") || "none") +
    (skipped.length ? ` (not models: ${skipped.join(", ")})` : "");
  if (candidates.length === 0) {
    throw new HubError(
      "quant_not_found",
      `${repo} has no .gguf model (files: ${files.join(", ") || "none"})`,
    );
  }
  if (!quant) {
    if (candidates.length === 1) return whole(repo, candidates[0]);
    throw new HubError(
      "quant_required",
      `${repo} has several .gguf models; choose one with quant: ${listing}`,
    );
  }
  const q = quant.toLowerCase();
  const matching = candidates.filter((c) => c.file.toLowerCase().includes(q));
  const chosen = matching.find((c) => wholeToken(c.file.toLowerCase(), q)) ?? matching[0];
  if (!chosen) {
    throw new HubError(
      "quant_not_found",
      `${repo} has no .gguf model for quant ${quant}; it has: ${listing}`,
    );
  }
  return whole(repo, chosen);
}

function whole(repo: string, c: Candidate): GgufChoice {
  if (c.missing.length > 0 || c.count < 1) {
    throw new HubError(
      "split_gguf_incomplete",
      `${repo}: the split GGUF ${c.file} lacks part(s) ${c.missing.join(", ")} of ${c.count}`,
    );
  }
  return { file: c.file, parts: c.parts };
}
