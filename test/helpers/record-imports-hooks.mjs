import { appendFileSync } from 'node:fs'

let file

export function initialize(data) {
  file = data.file
}

export async function resolve(specifier, context, next) {
  if (file) appendFileSync(file, specifier + '\n')
  return next(specifier, context)
}
