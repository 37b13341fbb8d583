import { HubError } from "./errors.ts";

/** A hub repository named by a `model_id`: `org/name` or `scheme:org/name` (WIRE.md). */
export interface RepoRef {
  /** The configured source's scheme; null = the Hugging Face hub. */
  scheme: string | null;
  org: string;
  name: string;
}

const SEGMENT = "[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?";
const REF = new RegExp(`^(?:([a-z][a-z0-9_-]*):)?(${SEGMENT})/(${SEGMENT})$`);

export function parseRepoRef(modelId: string): RepoRef {
  const m = REF.exec(modelId);
  if (!m || m[2].includes("..") || m[3].includes("..")) {
    throw new HubError(
      "invalid_model_id",
      `model_id ${JSON.stringify(modelId)} is not a hub repository (org/name or scheme:org/name)` +
        " nor an absolute .gguf path",
    );
  }
  return { scheme: m[1] ?? null, org: m[2], name: m[3] };
}

export function repoName(ref: RepoRef): string {
  return `${ref.org}/${ref.name}`;
}
