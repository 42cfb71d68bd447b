/** The numeric parameters of each item of a field, by the item's name: `"token";r=99;t=1` is token → {r: 99, t: 1}. */
export type FieldItems = Map<string, Map<string, number>>

// An item: a quoted name and its parameters (draft-ietf-httpapi-ratelimit-headers-11: a List of Strings).
const ITEM = /^\s*"([^"\\]*)"((?:;[a-z*][a-z0-9_.*-]*(?:=[^;]*)?)*)\s*$/

/**
 * The items of a `RateLimit` or `RateLimit-Policy` field with their parameters that are whole numbers (`r`, `t`, `q`,
 * `w`); what is not a whole number is left out, and an item that cannot be read is ignored, as the draft says.
 */
export function fieldItems(value: string | null): FieldItems {
  const items: FieldItems = new Map()
  for (const item of value?.split(',') ?? []) {
    const match = ITEM.exec(item)
    if (match === null) continue
    const params = new Map<string, number>()
    for (const param of match[2]!.split(';').slice(1)) {
      const [key, number] = param.split('=')
      if (number !== undefined && /^[0-9]{1,15}$/.test(number)) params.set(key!, Number(number))
    }
    items.set(match[1]!, params)
  }
  return items
}

/** One policy as an answer told it: what is left (`r`), when more comes back (`t`), and its quota `q` per `w`. */
export interface PolicyReport {
  name: string
  remaining: number
  resetSeconds: number | undefined
  quota: number | undefined
  windowSeconds: number | undefined
}

/**
 * Each policy an answer's `RateLimit` field reports a remaining budget for, with its quota and window from the
 * `RateLimit-Policy` field when that names it.
 */
export function policyReports(headers: Headers): PolicyReport[] {
  const policies = fieldItems(headers.get('ratelimit-policy'))
  const reports: PolicyReport[] = []
  for (const [name, params] of fieldItems(headers.get('ratelimit'))) {
    const remaining = params.get('r')
    if (remaining === undefined) continue
    const policy = policies.get(name)
    const [quota, windowSeconds] = [policy?.get('q'), policy?.get('w')]
    const paced = quota !== undefined && quota > 0 && windowSeconds !== undefined && windowSeconds > 0
    reports.push({
      name,
      remaining,
      resetSeconds: params.get('t'),
      quota: paced ? quota : undefined,
      windowSeconds: paced ? windowSeconds : undefined,
    })
  }
  return reports
}
