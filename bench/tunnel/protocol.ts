// What each benchmark connection says first, whatever carries it (TCP socket, WebSocket, tunnel
// stream): one mode byte, then for a sink the number of bytes it should expect.
export const MODE_ECHO = 0x45; // 'E': echo everything back
export const MODE_SINK = 0x53; // 'S': count bytes, answer one byte when all have arrived
export const HELLO_SIZE = 9;

export function hello(mode: number, expect = 0): Buffer {
  const b = Buffer.alloc(HELLO_SIZE);
  b[0] = mode;
  b.writeBigUInt64BE(BigInt(expect), 1);
  return b;
}

export function parseHello(b: Buffer): { mode: number; expect: number } {
  return { mode: b[0]!, expect: Number(b.readBigUInt64BE(1)) };
}
