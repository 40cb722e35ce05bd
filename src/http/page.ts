import { z } from 'zod';

/** A page of a list read by signed cursor: its items, and the cursor of the next page (null after the last). */
export const pageOf = <Item extends z.ZodType>(item: Item) =>
  z.object({
    items: z.array(item),
    nextCursor: z.string().nullable(),
  });
