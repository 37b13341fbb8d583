/**
 * llama.cpp's own Jinja engine (common/jinja: what llama-server renders chat templates
 * with), as the oracle for neuron's renders: the prebuilt llama.cpp package of
 * llama_cpp/package.ts ships it in llama-addon.node, whose AddonJinjaRenderer renders a
 * template with given variables. The addon is a Node-API module that sets llama.cpp's log
 * callback when loaded, so it runs in a child process of its own, one per batch of jobs,
 * away from the llama.cpp that llama_ref.ts drives in the test's process.
 */

import { llamaBinaries } from "./llama_cpp/package.ts";

export interface JinjaJob {
  template: string;
  variables: Record<string, unknown>;
}

/** The text, or the error llama.cpp raised (its message includes the template's reason). */
export type JinjaResult = { ok: true; text: string } | { ok: false; error: string };

const CHILD = new URL("./llama_jinja_child.ts", import.meta.url).pathname;

/** Renders every job with llama.cpp's Jinja engine, in order. */
export async function llamaJinja(jobs: readonly JinjaJob[]): Promise<JinjaResult[]> {
  const addon = `${(await llamaBinaries()).dir}/llama-addon.node`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-ffi", "--allow-env", CHILD, addon],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(JSON.stringify(jobs)));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  if (code !== 0) {
    throw new Error(
      `llama.cpp's Jinja renderer failed (${code}): ${new TextDecoder().decode(stderr)}`,
    );
  }
  return JSON.parse(new TextDecoder().decode(stdout));
}
