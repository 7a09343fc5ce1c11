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

#endif
