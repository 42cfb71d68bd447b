import { TOKEN_COLUMNS } from './rows.js'

/** Rows an export reads per page: memory stays bounded, and each page costs one indexed range read. */
export const TRANSFER_PAGE = 5000

/**
 * The tokens to export, in an order where a maker comes before every token it made: by depth in the forest of
 * makers (a root was made otherwise, or its maker is gone), then age. `filter` narrows it (`AND a.name = ...`).
 * The same SQL on both backends.
 */
export function tokensRootsFirst(filter: string): string {
  return `WITH RECURSIVE lineage (id, depth) AS (
      SELECT t.id, 0 FROM tokens t
      WHERE t.created_by IS NULL OR NOT EXISTS (SELECT 1 FROM tokens m WHERE m.id = t.created_by)
      UNION ALL
      SELECT t.id, l.depth + 1 FROM lineage l JOIN tokens t ON t.created_by = l.id)
    SELECT ${TOKEN_COLUMNS}
    FROM tokens t JOIN accounts a ON a.id = t.account_id LEFT JOIN lineage l ON l.id = t.id
    WHERE true ${filter}
    ORDER BY coalesce(l.depth, 1000000000), t.created_at, t.id`
}
