/*
 * libopus for the engine worklet: a numbers-only API over its encoder and decoder, built with
 * emscripten into a module with no imports (scripts/build-opus.mjs).
 *
 * Why a shim: libopus's control call is variadic, which a WebAssembly export cannot be, and the
 * worklet can pass only numbers. Every function here takes and returns plain integers: a handle
 * is the address of libopus's state in this module's memory, and a negative return is libopus's
 * own error code (OPUS_BAD_ARG, OPUS_INVALID_PACKET, ...), never a trap.
 *
 * Samples and packets pass through two fixed exchange areas (tutti_opus_pcm, tutti_opus_packet):
 * the caller writes a frame there, calls, and reads the result there. The module's memory never
 * grows (-sALLOW_MEMORY_GROWTH=0), so a view of it made once at set-up stays valid: nothing is
 * allocated per frame on either side. Encoders and decoders are allocated when created (set-up,
 * off the audio thread's steady state) and released by tutti_opus_free.
 *
 * Every heap call in the module, libopus's and this file's, goes through opus_alloc,
 * opus_realloc and opus_free (wasm/opus/alloc.h, included before every source file), which
 * count them: tutti_opus_allocations() is what the tests watch to show the per-frame calls make
 * none.
 *
 * Settings are the hub's (server/src/hub/opus.rs): 48 kHz, OPUS_APPLICATION_RESTRICTED_LOWDELAY
 * (CELT only: 2.5 and 5 ms frames, 2.5 ms of look-ahead), the caller's bit rate.
 */
#include <stdlib.h>

#include "opus.h"

/* Heap calls (allocations, reallocations and frees) since the module was instantiated. */
static unsigned int allocations;

void *opus_alloc(size_t size) {
  allocations++;
  return malloc(size);
}

void *opus_realloc(void *ptr, size_t size) {
  allocations++;
  return realloc(ptr, size);
}

void opus_free(void *ptr) {
  allocations++;
  free(ptr);
}

unsigned int tutti_opus_allocations(void) { return allocations; }

#define TUTTI_OPUS_RATE 48000
/* The longest frame Opus codes at 48 kHz (20 ms), stereo, interleaved. */
#define TUTTI_OPUS_MAX_SAMPLES (960 * 2)
/* libopus's own bound on one frame's packet (1275) rounded up. */
#define TUTTI_OPUS_MAX_PACKET 1280

static float pcm[TUTTI_OPUS_MAX_SAMPLES];
static unsigned char packet[TUTTI_OPUS_MAX_PACKET];

/* The exchange areas: a frame of interleaved float samples, and a packet's bytes. */
float *tutti_opus_pcm(void) { return pcm; }
int tutti_opus_pcm_samples(void) { return TUTTI_OPUS_MAX_SAMPLES; }
unsigned char *tutti_opus_packet(void) { return packet; }
int tutti_opus_packet_bytes(void) { return TUTTI_OPUS_MAX_PACKET; }

/* A frame length Opus codes; stereo at the longest fills the pcm area exactly. */
static int frames_ok(int frames) {
  return frames == 120 || frames == 240 || frames == 480 || frames == 960;
}

static int channels_ok(int channels) { return channels == 1 || channels == 2; }

/* An encoder of `channels` at `bitrate` bit/s: its handle, or a negative error. */
int tutti_opus_encoder_new(int channels, int bitrate) {
  if (!channels_ok(channels)) return OPUS_BAD_ARG;
  OpusEncoder *e = opus_alloc(opus_encoder_get_size(channels));
  if (!e) return OPUS_ALLOC_FAIL;
  int r = opus_encoder_init(e, TUTTI_OPUS_RATE, channels, OPUS_APPLICATION_RESTRICTED_LOWDELAY);
  if (r == OPUS_OK) r = opus_encoder_ctl(e, OPUS_SET_BITRATE(bitrate));
  if (r != OPUS_OK) {
    opus_free(e);
    return r;
  }
  return (int)(size_t)e;
}

int tutti_opus_encoder_set_bitrate(int handle, int bitrate) {
  return opus_encoder_ctl((OpusEncoder *)(size_t)handle, OPUS_SET_BITRATE(bitrate));
}

/* Samples of look-ahead the encoder adds (the codec's delay). */
int tutti_opus_encoder_lookahead(int handle) {
  opus_int32 v = 0;
  int r = opus_encoder_ctl((OpusEncoder *)(size_t)handle, OPUS_GET_LOOKAHEAD(&v));
  return r == OPUS_OK ? (int)v : r;
}

/* Forgets an encoder's history, keeping its settings (a new stream begins). */
int tutti_opus_encoder_reset(int handle) {
  return opus_encoder_ctl((OpusEncoder *)(size_t)handle, OPUS_RESET_STATE);
}

/* Codes a stereo encoder's input as one channel (`mono` 1: the packets say mono and every bit
 * goes to the one signal) or as it comes (0). */
int tutti_opus_encoder_set_mono(int handle, int mono) {
  return opus_encoder_ctl((OpusEncoder *)(size_t)handle,
                          OPUS_SET_FORCE_CHANNELS(mono ? 1 : OPUS_AUTO));
}

/* Encodes `frames` samples per channel from the pcm area into the packet area: its length. */
int tutti_opus_encode(int handle, int frames) {
  if (!frames_ok(frames)) return OPUS_BAD_ARG;
  return opus_encode_float((OpusEncoder *)(size_t)handle, pcm, frames, packet,
                           TUTTI_OPUS_MAX_PACKET);
}

/* A decoder of `channels`: its handle, or a negative error. */
int tutti_opus_decoder_new(int channels) {
  if (!channels_ok(channels)) return OPUS_BAD_ARG;
  OpusDecoder *d = opus_alloc(opus_decoder_get_size(channels));
  if (!d) return OPUS_ALLOC_FAIL;
  int r = opus_decoder_init(d, TUTTI_OPUS_RATE, channels);
  if (r != OPUS_OK) {
    opus_free(d);
    return r;
  }
  return (int)(size_t)d;
}

/*
 * Decodes the packet area's first `len` bytes into `frames` samples per channel in the pcm area:
 * `frames`, or a negative error. A packet that codes any other length than `frames` (its own
 * table of contents says so) is OPUS_INVALID_PACKET: the caller always gets what it asked for.
 * `len` 0: the frame was lost, and Opus conceals it (`frames` of concealment, continuing the
 * decoder's state).
 */
int tutti_opus_decode(int handle, int len, int frames) {
  if (!frames_ok(frames)) return OPUS_BAD_ARG;
  if (len < 0 || len > TUTTI_OPUS_MAX_PACKET) return OPUS_BAD_ARG;
  if (len > 0 && opus_packet_get_nb_samples(packet, len, TUTTI_OPUS_RATE) != frames)
    return OPUS_INVALID_PACKET;
  return opus_decode_float((OpusDecoder *)(size_t)handle, len ? packet : NULL, len, pcm, frames, 0);
}

/* Forgets a decoder's history (a new stream begins). */
int tutti_opus_decoder_reset(int handle) {
  return opus_decoder_ctl((OpusDecoder *)(size_t)handle, OPUS_RESET_STATE);
}

void tutti_opus_free(int handle) { opus_free((void *)(size_t)handle); }
