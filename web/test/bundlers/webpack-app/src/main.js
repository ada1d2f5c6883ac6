// The app: what a user of the package writes, with its API on window for
// web/test/bundlers.test.mjs to drive.
import { Engine, WickError, WorkerEngine } from "wick";

window.wick = { Engine, WickError, WorkerEngine };
window.wickReady = true;
