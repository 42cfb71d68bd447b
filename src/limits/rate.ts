/** A limit: at most `max` per `windowMs`; `max` 0 means off. */
export interface Rate {
  max: number
  windowMs: number
}

const UNITS: Record<string, number> = { s: 1000, min: 60_000, h: 3_600_000 }

/** `600/min`, `10/s`, `5000/h`, or `0` (off). */
export const RATE_PATTERN = '^(0|[1-9][0-9]{0,6}/(s|min|h))$'

/** Reads a validated rate setting. */
export function parseRate(text: string): Rate {
  if (text === '0') return { max: 0, windowMs: 60_000 }
  const [max, unit] = text.split('/')
  return { max: Number(max), windowMs: UNITS[unit!]! }
}
