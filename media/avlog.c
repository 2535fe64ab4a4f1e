#include "avlog.h"

#include <stdarg.h>
#include <libavutil/log.h>

#include "_cgo_export.h"

static int kv_av_log_on;

// kv_av_log_cb is called by av_vlog on whatever thread logs (a Go thread inside a cgo call, or an
// FFmpeg worker thread). av_vlog does not filter by level (av_log_default_callback does), so the
// level check is here. The line is formatted on the stack; av_log_format_line2 truncates it to the
// buffer. The hand-off to Go is skipped entirely while disabled (no debug logger): no cgo callback
// per line on the hot path.
static void kv_av_log_cb(void *avcl, int level, const char *fmt, va_list vl) {
	if (!__atomic_load_n(&kv_av_log_on, __ATOMIC_RELAXED))
		return;
	if (level > av_log_get_level())
		return;
	char line[1024];
	int print_prefix = 0; // the component is passed apart
	if (av_log_format_line2(avcl, level, fmt, vl, line, sizeof(line), &print_prefix) < 0)
		return;
	const char *item = "";
	AVClass *avc = avcl ? *(AVClass **)avcl : NULL;
	if (avc && avc->item_name)
		item = avc->item_name(avcl);
	kvAvLog(avcl, level, (char *)item, line);
}

void kv_av_log_install(void) { av_log_set_callback(kv_av_log_cb); }

void kv_av_log_enable(int on) { __atomic_store_n(&kv_av_log_on, on, __ATOMIC_RELAXED); }
