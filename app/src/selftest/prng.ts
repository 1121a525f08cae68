// The seeded pseudo-random generator (xorshift32) of the TypeScript side: the self-test's
// schedules and every unit test draw from it. Same seed, same sequence, on every browser and in
// Node. (The benchmark's feeder inlines the same three shifts to stay allocation-free.)

export class Prng {
  private state: number;

  constructor(seed: number) {
    // xorshift has one fixed point (0): map it away, keep every other seed as given.
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  /** Next 32-bit unsigned integer. */
  nextU32(): number {
    let x = this.state;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    this.state = x;
    return x;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** Integer in [0, n) from the low bits (n much smaller than 2^32). */
  below(n: number): number {
    return this.nextU32() % n;
  }

  /** Integer uniform in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
}
