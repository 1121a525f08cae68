// Readable random room names such as "warm-cello-42": easy to say aloud to a bandmate.

const ADJECTIVES = [
  'warm', 'bright', 'mellow', 'swift', 'gentle', 'bold', 'quiet', 'lively', 'deep', 'golden',
  'silver', 'velvet', 'crisp', 'sunny', 'misty', 'brisk', 'calm', 'happy', 'grand', 'little',
];
const INSTRUMENTS = [
  'cello', 'viola', 'violin', 'oboe', 'flute', 'horn', 'tuba', 'harp', 'banjo', 'piano',
  'organ', 'drum', 'bass', 'guitar', 'trumpet', 'clarinet', 'bassoon', 'sax', 'lute', 'marimba',
];

/** `rand` returns numbers in [0, 1), like Math.random. */
export function randomRoomName(rand: () => number = Math.random): string {
  const pick = <T>(list: readonly T[]): T => list[Math.min(list.length - 1, Math.floor(rand() * list.length))]!;
  const n = 10 + Math.min(89, Math.floor(rand() * 90));
  return `${pick(ADJECTIVES)}-${pick(INSTRUMENTS)}-${n}`;
}
