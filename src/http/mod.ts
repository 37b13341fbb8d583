/** The HTTP/1.1 server the node listens with (timeouts, connection cap, EMFILE back-off). */
export { HttpError, type HttpErrorCode } from "./errors.ts";
export { type Handler } from "./connection.ts";
export { HttpServer, type HttpServerOptions } from "./server.ts";
export { connectionCap, openFileLimit } from "./fd_limit.ts";
