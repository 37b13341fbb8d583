import type { App, Ctx } from "./context.ts";
import { ServerError } from "./errors.ts";

type Method = "GET" | "POST";
type Handler = (c: Ctx) => Response | Promise<Response>;

/**
 * Registers handlers so that each knows its route pattern (the metrics label, bounded
 * unlike raw paths) and every known path answers 405 with `Allow` to other methods.
 */
export class Routes {
  readonly #app: App;
  readonly #methods = new Map<string, Method[]>();

  constructor(app: App) {
    this.#app = app;
  }

  on(method: Method, path: string, handler: Handler): this {
    this.#app.on(method, path, (c) => {
      c.set("route", path);
      return handler(c);
    });
    const list = this.#methods.get(path) ?? [];
    list.push(method);
    this.#methods.set(path, list);
    return this;
  }

  /** Call once after every `on`: adds the 405 answers. */
  finish(): void {
    for (const [path, methods] of this.#methods) {
      const allow = [...methods, ...(methods.includes("GET") ? ["HEAD"] : [])].join(", ");
      this.#app.all(path, (c) => {
        c.set("route", path);
        throw new ServerError("method_not_allowed", `${c.req.method} is not allowed here`, {
          headers: { allow },
        });
      });
    }
  }
}
