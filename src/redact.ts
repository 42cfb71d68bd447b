/** A URL fit for error messages and logs: any user:password@ part replaced. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@')
}
