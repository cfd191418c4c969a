// Preloaded into the Gemini CLI (NODE_OPTIONS=--import=<this file>) by a test: the first
// time the CLI starts its 500 ms wait for a first chunk of stdin, the wait ends at once,
// before the piped prompt can be read, as when a busy machine stalls the CLI's event loop
// that long. Creating the file named by HATLOOP_STDIN_STALL_MARKER records that it
// happened and leaves later runs alone.
import fs from "node:fs";

const marker = process.env.HATLOOP_STDIN_STALL_MARKER;
const setTimeoutBefore = globalThis.setTimeout;

globalThis.setTimeout = function (callback, ms, ...args) {
  if (marker && ms === 500 && String(callback).includes("onEnd")) {
    try {
      fs.writeFileSync(marker, `${process.pid}\n`, { flag: "wx" });
    } catch {
      return setTimeoutBefore(callback, ms, ...args); // not the first time
    }
    process.nextTick(callback, ...args); // before any poll for stdin
    return setTimeoutBefore(() => {}, 0);
  }
  return setTimeoutBefore(callback, ms, ...args);
};
