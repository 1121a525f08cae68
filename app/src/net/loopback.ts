// A data channel that hands every message it sends straight back to itself: the self-test's
// "network". With it the packet pump carries the user's own packets from the outbound ring into
// the inbound ring, so the self-test runs the whole engine path (capture, packetize, jitter
// buffer, concealment, drift, mix) with no network at all, offline included.
//
// It implements the part of RTCDataChannel the pump uses. Each message is copied, as a real
// channel delivers a fresh ArrayBuffer per message.

export class LoopbackChannel {
  binaryType: BinaryType = 'arraybuffer';
  readyState: RTCDataChannelState = 'open';
  readonly bufferedAmount = 0;
  onmessage: ((ev: MessageEvent) => void) | null = null;
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  /** Messages sent and delivered. */
  delivered = 0;

  send(data: ArrayBufferView | ArrayBuffer): void {
    if (this.readyState !== 'open')
      throw new DOMException('the loopback channel is closed', 'InvalidStateError');
    const bytes =
      data instanceof ArrayBuffer
        ? data.slice(0)
        : (data.buffer as ArrayBuffer).slice(data.byteOffset, data.byteOffset + data.byteLength);
    this.delivered++;
    this.onmessage?.({ data: bytes } as MessageEvent);
  }

  close(): void {
    if (this.readyState === 'closed') return;
    this.readyState = 'closed';
    this.onclose?.();
  }

  /** This object where the pump expects an RTCDataChannel. */
  asDataChannel(): RTCDataChannel {
    return this as unknown as RTCDataChannel;
  }
}
