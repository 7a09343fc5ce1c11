/* html_int.h: what html.c shares with html_fast.c. */
#ifndef HARVESTD_HTML_INT_H
#define HARVESTD_HTML_INT_H

#include <gumbo.h>

/** gumbo's options for one parse on this thread: max_errors = 0 (the default keeps every parse
 *  error, and unclosed nesting then costs memory quadratic in depth), and the thread's arena
 *  as allocator if hv_html_use_arena() gave one. */
void hv_html__gumbo_options(GumboOptions *o);
/** Destroy a tree parsed with those options, and reset the arena it came from. */
void hv_html__gumbo_destroy(GumboOptions *o, GumboOutput *doc);

/* The check after every parse: the pre-scan follows gumbo closely but not exactly, so a tree
 * that came out deeper than allowed (with some slack) is flattened, to be freed without deep
 * recursion, and its depth returned; 0 for a tree within bounds. */
size_t hv_html__too_deep(const GumboOptions *o, GumboOutput *doc);

#endif
