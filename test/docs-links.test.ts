import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { test } from 'node:test'
import { REPO_ROOT } from './helpers/server-process.js'

const SKIPPED = new Set(['node_modules', 'dist', 'data', '.git'])

/** Every Markdown file of the repository, as a path relative to its root. */
function markdownFiles(dir = REPO_ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.isDirectory()) return SKIPPED.has(entry.name) ? [] : markdownFiles(join(dir, entry.name))
    return entry.name.endsWith('.md') ? [relative(REPO_ROOT, join(dir, entry.name))] : []
  })
}

/** The targets of a Markdown text's inline and reference links, code (fenced or inline) left out. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^```[^\n]*\n[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
  const inline = [...prose.matchAll(/\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)].map((match) => match[1]!)
  const references = [...prose.matchAll(/^\s*\[[^\]]+\]:\s*<?([^\s>]+)>?/gm)].map((match) => match[1]!)
  return [...inline, ...references]
}

test('every relative link of the README and docs names a file inside the repository, which exists', () => {
  const files = markdownFiles()
  assert.ok(files.includes('README.md') && files.includes(join('docs', 'plant-store-interface.md')))
  const broken: string[] = []
  for (const file of files) {
    for (const target of linkTargets(readFileSync(join(REPO_ROOT, file), 'utf8'))) {
      // Web addresses and mail are not files of the repository; a bare #anchor stays in the same file.
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue
      const path = resolve(REPO_ROOT, dirname(file), decodeURIComponent(target.split('#')[0]!))
      const inside = !relative(REPO_ROOT, path).startsWith('..')
      if (!inside || !existsSync(path)) broken.push(`${file}: ${target}${inside ? '' : ' (outside the repository)'}`)
    }
  }
  assert.deepEqual(broken, [])
})

test('the README links to the interface the service implements, kept in the repository', () => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  assert.ok(linkTargets(readme).includes('docs/plant-store-interface.md'))
})
