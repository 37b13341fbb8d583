/**
 * What a template sees beyond the conversation, as llama.cpp gives it: Jinja's constants,
 * a bounded `range`, today's date as `date_string` ("26 Jul 2024"; Llama 3.1 prints it as
 * "Today Date") and `datetime`, `strftime_now` in the C locale, and `raise_exception`,
 * whose message says why the template refused the conversation (Mistral's and Gemma's
 * role rules). @huggingface/jinja declares its own versions of the functions, which a
 * render's variables cannot replace, so the environment is built here.
 */

import { Environment, Interpreter, type Template } from "@huggingface/jinja";
import { boundedRange } from "./render_budget.ts";
import { strftime } from "./strftime.ts";

/** The template called `raise_exception`: the request broke the model's rules. */
export class TemplateRaised extends Error {}

const CONSTANTS = { true: true, false: false, none: null, True: true, False: false, None: null };

/** Names a request's variables may not replace. */
export const GLOBAL_NAMES: ReadonlySet<string> = new Set([
  ...Object.keys(CONSTANTS),
  "range",
  "strftime_now",
  "raise_exception",
]);

const GLOBALS: Record<string, unknown> = {
  ...CONSTANTS,
  range: boundedRange,
  strftime_now: (format: unknown): string => strftime(new Date(), String(format)),
  raise_exception: (message: unknown): never => {
    throw new TemplateRaised(String(message));
  },
};

/** The dates llama.cpp gives every template; a request's kwargs may replace them. */
export function dateVariables(now: Date): Record<string, string> {
  return { date_string: strftime(now, "%d %b %Y"), datetime: strftime(now, "%b %d %Y") };
}

/** Renders `template` with the globals and `variables`, which may not redefine them. */
export function renderWithGlobals(template: Template, variables: Record<string, unknown>): string {
  const env = new Environment();
  for (const [name, value] of Object.entries({ ...GLOBALS, ...variables })) env.set(name, value);
  return String(new Interpreter(env).run(template.parsed).value);
}
