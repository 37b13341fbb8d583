import { HubError } from "./errors.ts";

/**
 * A hub repository named by a `model_id`: `org/name` or `scheme:org/name` (WIRE.md), with
 * an optional `@revision` (a branch, tag or commit; `refs/pr/1` too).
 */
export interface RepoRef {
  /** The configured source's scheme; null = the Hugging Face hub. */
  scheme: string | null;
  org: string;
  name: string;
  /** Branch, tag or commit; absent = `main`. */
  revision?: string;
}

const SEGMENT = "[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?";
const REF = new RegExp(`^(?:([a-z][a-z0-9_-]*):)?(${SEGMENT})/(${SEGMENT})(?:@(.+))?$`);
/** Git ref names as the hub accepts them, and nothing that could climb out of `refs/`. */
const REVISION = /^[A-Za-z0-9_][A-Za-z0-9._\/-]{0,254}$/;

/** A commit, as huggingface_hub recognises one (it is then not recorded under refs/). */
export const COMMIT = /^[0-9a-f]{40}$/;

export function checkRevision(revision: string): string {
  if (
    !REVISION.test(revision) ||
    revision.split("/").some((s) => s === "" || s === "." || s === "..") ||
    revision.endsWith(".lock")
  ) {
    throw new HubError(
      "invalid_model_id",
      `revision ${JSON.stringify(revision)} is not a branch, tag or commit name`,
    );
  }
  return revision;
}

/**
 * `model_id` as a repository; `revision` (the load spec's field) must agree with an
 * `@revision` in the id when both are given.
 */
export function parseRepoRef(modelId: string, revision?: string | null): RepoRef {
  const m = REF.exec(modelId);
  if (!m || m[2].includes("..") || m[3].includes("..")) {
    throw new HubError(
      "invalid_model_id",
      `model_id ${JSON.stringify(modelId)} is not a hub repository ` +
        "(org/name[@revision] or scheme:org/name[@revision]) nor an absolute .gguf path",
    );
  }
  if (m[4] !== undefined && revision && m[4] !== revision) {
    throw new HubError(
      "invalid_model_id",
      `model_id ${JSON.stringify(modelId)} names revision ${m[4]}, the revision field ${revision}`,
    );
  }
  const rev = m[4] ?? revision ?? undefined;
  return {
    scheme: m[1] ?? null,
    org: m[2],
    name: m[3],
    ...(rev === undefined ? {} : { revision: checkRevision(rev) }),
  };
}

export function repoName(ref: RepoRef): string {
  return `${ref.org}/${ref.name}`;
}

export function revisionOf(ref: RepoRef): string {
  return ref.revision ?? "main";
}
