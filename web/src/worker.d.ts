// The worker entry of the "wick" package: start it as a module worker and hand
// its URL to createWorkerEngine(url). It exports nothing.
export {};
