// FFmpeg log routing (issue 15): av_log lines go to Go (and zap) instead of stderr.
#ifndef KVROUTE_MEDIA_AVLOG_H
#define KVROUTE_MEDIA_AVLOG_H

// kv_av_log_install replaces FFmpeg's process-wide log callback (av_log_set_callback) with one that
// hands each line at or below av_log_get_level() to Go while enabled, and drops it otherwise: once
// installed, FFmpeg writes nothing to stderr.
void kv_av_log_install(void);

// kv_av_log_enable turns the hand-off to Go on (1) or off (0); any thread.
void kv_av_log_enable(int on);

#endif
