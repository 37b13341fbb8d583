import { runCli } from "./src/cli/mod.ts";

if (import.meta.main) Deno.exit(await runCli(Deno.args));
