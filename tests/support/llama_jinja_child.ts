/**
 * The child process of llama_jinja.ts: loads llama-addon.node (path in argv), renders each
 * job read as JSON from stdin with llama.cpp's Jinja engine, writes the results as JSON.
 */

import { createRequire } from "node:module";

interface Renderer {
  render(variables: Record<string, unknown>): string;
}

interface Addon {
  AddonJinjaRenderer: new (template: string) => Renderer;
}

const addon = createRequire(import.meta.url)(Deno.args[0]) as Addon;
const jobs = JSON.parse(await new Response(Deno.stdin.readable).text()) as {
  template: string;
  variables: Record<string, unknown>;
}[];
const results = jobs.map(({ template, variables }) => {
  try {
    return { ok: true, text: new addon.AddonJinjaRenderer(template).render(variables) };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
});
await Deno.stdout.write(new TextEncoder().encode(JSON.stringify(results)));
