// The display-name rule, the same one the server applies to `join` (server/src/protocol.rs):
// every name field checks it before joining, so the user reads what is wrong beside the field
// instead of a refusal from the server after the microphone has opened.
//
// A name is trimmed of white space at both ends (Unicode White_Space, as the server trims), and
// refused when it is empty or longer than NAME_MAX_CHARS characters (code points), holds a
// control character, holds a character that overrides or isolates the text direction (a name
// could then show itself as someone else's, or reorder what follows it), or has no visible
// character at all (only zero-width, format or combining characters).

/** Longest name the server accepts, in Unicode code points after trimming. */
export const NAME_MAX_CHARS = 40;

const EDGE_SPACE = /^\p{White_Space}+|\p{White_Space}+$/gu;
const CONTROL = /\p{Cc}/u;
/** Bidirectional embeddings and overrides (U+202A-U+202E) and isolates (U+2066-U+2069). */
const BIDI_CONTROL = /[\u202A-\u202E\u2066-\u2069]/u;
/** A character that shows: not white space, not a format or other default-ignorable character
 * (zero-width spaces and joiners, Hangul fillers, variation selectors, tags), not the Braille
 * blank, not a mark on its own. */
const VISIBLE = /[^\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{M}\u2800]/u;

export type NameCheck = { ok: true; name: string } | { ok: false; problem: string };

/** Trims `raw` and checks it; the trimmed name, or a sentence saying what to change. */
export function checkDisplayName(raw: string): NameCheck {
  const name = raw.replace(EDGE_SPACE, '');
  if (name === '') return { ok: false, problem: 'Enter the name others will see.' };
  if (CONTROL.test(name)) {
    return { ok: false, problem: 'A name cannot hold control characters such as tabs or line breaks.' };
  }
  if (BIDI_CONTROL.test(name)) {
    return {
      ok: false,
      problem:
        'A name cannot hold characters that change the direction of the text (bidirectional overrides).',
    };
  }
  if (!VISIBLE.test(name)) return { ok: false, problem: 'A name needs at least one visible character.' };
  const length = [...name].length;
  if (length > NAME_MAX_CHARS) {
    return { ok: false, problem: `A name is at most ${NAME_MAX_CHARS} characters (this one has ${length}).` };
  }
  return { ok: true, name };
}
