/* detail.c: the table of failure-detail texts (see detail.h). */
#include "harvestd/detail.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The one place these texts are spelled. Records and the README promise them, and the
 * integration tests pin many: change one only on purpose. A family's "<...>" is replaced by
 * its argument; the name inside only documents what goes there. */
static const char *const hv_details[HV_D__COUNT] = {
    [HV_D_NONE] = "",

    [HV_D_LINE_EXCEEDS_8_KIB] = "line_exceeds_8_kib",
    [HV_D_INVALID_UTF8] = "invalid_utf8",
    [HV_D_CONTROL_CHARACTER] = "control_character",
    [HV_D_CONTAINS_SPACE] = "contains_space",
    [HV_D_NOT_ABSOLUTE] = "not_absolute",
    [HV_D_NON_ASCII_HOST] = "non_ascii_host",
    [HV_D_MALFORMED] = "malformed",
    [HV_D_USERINFO_NOT_SUPPORTED] = "userinfo_not_supported",
    [HV_D_EMPTY_HOST] = "empty_host",
    [HV_D_INVALID_HOST] = "invalid_host",
    [HV_D_INVALID_PORT] = "invalid_port",
    [HV_D_URL_TOO_LONG] = "url_too_long",
    [HV_D_UNSUPPORTED_SCHEME] = "unsupported_scheme",
    [HV_D_ENTRY_WITHOUT_URL] = "entry_has_no_url",
    [HV_D_UNKNOWN_RULES] = "unknown_rules",
    [HV_D_DELIVERED_TOO_OFTEN] = "delivered_too_often",

    [HV_D_NAME_NOT_RESOLVED] = "name_not_resolved",
    [HV_D_DNS_TEMPORARY_FAILURE] = "dns_temporary_failure",
    [HV_D_NO_ADDRESS_FOR_NAME] = "no_address_for_name",
    [HV_D_DNS_ERROR] = "dns_<error>",
    [HV_D_DNS_LOOKUP_EXCEEDED] = "dns_lookup_exceeded_<duration>",

    [HV_D_CONNECTION_REFUSED] = "connection_refused",
    [HV_D_NETWORK_UNREACHABLE] = "network_unreachable",
    [HV_D_HOST_UNREACHABLE] = "host_unreachable",
    [HV_D_CONNECT_TIMED_OUT] = "connect_timed_out",
    [HV_D_CONNECT_ERROR] = "connect_<error>",
    [HV_D_NO_CONNECTION_WITHIN] = "no_connection_within_<duration>",
    [HV_D_NO_TLS_HANDSHAKE_WITHIN] = "no_tls_handshake_within_<duration>",
    [HV_D_HTTPS_NOT_SUPPORTED] = "https_not_supported",

    [HV_D_BLOCKED_UNSPECIFIED_ADDRESS] = "blocked_unspecified_address",
    [HV_D_BLOCKED_LOOPBACK_ADDRESS] = "blocked_loopback_address",
    [HV_D_BLOCKED_PRIVATE_ADDRESS] = "blocked_private_address",
    [HV_D_BLOCKED_SHARED_ADDRESS] = "blocked_shared_address",
    [HV_D_BLOCKED_LINK_LOCAL_ADDRESS] = "blocked_link_local_address",
    [HV_D_BLOCKED_SPECIAL_PURPOSE_ADDRESS] = "blocked_special_purpose_address",
    [HV_D_BLOCKED_BENCHMARKING_ADDRESS] = "blocked_benchmarking_address",
    [HV_D_BLOCKED_MULTICAST_ADDRESS] = "blocked_multicast_address",
    [HV_D_BLOCKED_RESERVED_ADDRESS] = "blocked_reserved_address",
    [HV_D_BLOCKED_BROADCAST_ADDRESS] = "blocked_broadcast_address",

    [HV_D_CERTIFICATE_UNTRUSTED] = "certificate_untrusted",
    [HV_D_CERTIFICATE_EXPIRED] = "certificate_expired",
    [HV_D_CERTIFICATE_NOT_YET_VALID] = "certificate_not_yet_valid",
    [HV_D_CERTIFICATE_HOSTNAME_MISMATCH] = "certificate_hostname_mismatch",
    [HV_D_CERTIFICATE_REVOKED] = "certificate_revoked",
    [HV_D_CERTIFICATE_INVALID] = "certificate_invalid",
    [HV_D_TLS_ALERT] = "tls_alert_<description>",
    [HV_D_TLS_ALERT_UNKNOWN] = "tls_alert",
    [HV_D_TLS_CLOSED_DURING_HANDSHAKE] = "tls_closed_during_handshake",
    [HV_D_TLS_RESET_DURING_HANDSHAKE] = "tls_connection_reset_during_handshake",
    [HV_D_TLS_PROTOCOL_VERSION] = "tls_protocol_version",
    [HV_D_TLS_NO_SHARED_CIPHER] = "tls_no_shared_cipher",
    [HV_D_TLS_INVALID_RECORD] = "tls_invalid_record",
    [HV_D_TLS_WRITE_BLOCKED] = "tls_write_blocked",
    [HV_D_TLS_WRITE_FAILED] = "tls_write_failed",
    [HV_D_TLS_ERROR] = "tls_error_-0x<code>",
    [HV_D_TLS_FAILED] = "tls",

    [HV_D_CONNECTION_RESET] = "connection_reset",
    [HV_D_CONNECTION_ERROR] = "connection_error_<error>",
    [HV_D_CLOSED_BEFORE_RESPONSE] = "connection_closed_before_response",
    [HV_D_CLOSED_IN_HEADERS] = "connection_closed_in_headers",
    [HV_D_CLOSED_MID_BODY] = "connection_closed_mid_body",
    [HV_D_REQUEST_EXCEEDED] = "request_exceeded_<duration>",
    [HV_D_NO_DATA_FOR] = "no_data_for_<duration>",

    [HV_D_HTTP_STATUS] = "http_<status>",
    [HV_D_TOO_MANY_REDIRECTS] = "more_than_<n>_redirects",
    [HV_D_REDIRECT_TO_UNSUPPORTED_SCHEME] = "redirect_to_unsupported_scheme",
    [HV_D_INVALID_REDIRECT_LOCATION] = "invalid_redirect_location",
    [HV_D_UNEXPECTED_CONTENT_TYPE] = "unexpected_content_type",
    [HV_D_HEADERS_EXCEED] = "headers_exceed_<size>",
    [HV_D_RESPONSE_EXCEEDS] = "response_exceeds_<size>",
    [HV_D_CONTENT_TYPE_TOO_LONG] = "content_type_too_long",
    [HV_D_LOCATION_TOO_LONG] = "location_too_long",
    [HV_D_UNEXPECTED_PROTOCOL_SWITCH] = "unexpected_protocol_switch",
    [HV_D_UNSUPPORTED_CONTENT_ENCODING] = "unsupported_content_encoding",
    [HV_D_BODY_ABORTED] = "aborted",
    [HV_D_DECODE_CORRUPT] = "<codec>_corrupt",
    [HV_D_DECODE_TRUNCATED] = "<codec>_truncated",
    [HV_D_DECODE_INIT_FAILED] = "<codec>_init_failed",
    [HV_D_DECODE_WINDOW_TOO_LARGE] = "<codec>_window_too_large",
    [HV_D_HTTP_PARSE] = "<llhttp_error>",
    [HV_D_STREAM_RESET] = "stream_reset_<code>",
    [HV_D_GOAWAY] = "goaway_<code>",
    [HV_D_H2_ERROR] = "h2_<code>",

    [HV_D_DISALLOWED_BY_ROBOTS] = "disallowed_by_robots_txt",
    [HV_D_ROBOTS_UNAVAILABLE] = "robots_txt_unavailable_<cause>",

    [HV_D_NO_TITLE] = "no_title",
    [HV_D_NESTING_EXCEEDS] = "nesting_exceeds_<depth>",
    [HV_D_PARSER_CRASHED] = "parser_crashed_on_this_page",
    [HV_D_DEPTH_SUM_EXCEEDS] = "depth_sum_exceeds_<n>",
    [HV_D_FORMATTING_OPEN_BEYOND] = "formatting_elements_open_beyond_<n>",
    [HV_D_FORMATTING_REOPENED_BEYOND] = "formatting_elements_reopened_beyond_<n>",
    [HV_D_TABLE_CELLS_NESTED_BEYOND] = "table_cells_nested_beyond_<n>",
    [HV_D_TEMPLATES_NESTED_BEYOND] = "templates_nested_beyond_<n>",
    [HV_D_OBJECTS_NESTED_BEYOND] = "objects_nested_beyond_<n>",
    [HV_D_ELEMENTS_EXCEED] = "elements_exceed_<n>",
    [HV_D_KNOWN_TO_CRASH_PARSER] = "document_known_to_crash_the_parser",
    [HV_D_ATTRIBUTES_EXCEED] = "attributes_exceed_<n>",
    [HV_D_MERGED_ATTRIBUTES_EXCEED] = "merged_attributes_exceed_<n>",
    [HV_D_ATTRIBUTE_COPIES_EXCEED] = "attribute_copies_exceed_<n>",
    [HV_D_ATTRIBUTE_COMPARISONS_EXCEED] = "attribute_comparisons_exceed_<n>",
    [HV_D_FIELDS_EXCEED] = "fields_exceed_<size>",
    [HV_D_RECORD_EXCEEDS] = "record_exceeds_<size>",

    [HV_D_PROXY_CONNECT_REFUSED] = "proxy_connect_refused",
    [HV_D_PROXY_CONNECT_TIMED_OUT] = "proxy_connect_timed_out",
    [HV_D_NO_PROXY_CONNECTION_WITHIN] = "no_proxy_connection_within_<duration>",
    [HV_D_PROXY_CONNECT_ERROR] = "proxy_connect_error_<error>",
    [HV_D_PROXY_NAME_NOT_RESOLVED] = "proxy_name_not_resolved",
    [HV_D_PROXY_AUTH_REQUIRED] = "proxy_auth_required_407",
    [HV_D_PROXY_HTTP_STATUS] = "proxy_http_<status>",
    [HV_D_PROXY_CLOSED] = "proxy_closed_connection",
    [HV_D_PROXY_BAD_REPLY] = "proxy_bad_reply",
    [HV_D_PROXY_REPLY_TOO_LARGE] = "proxy_reply_too_large",
    [HV_D_SOCKS_NO_ACCEPTABLE_METHOD] = "socks_no_acceptable_method",
    [HV_D_SOCKS_AUTH_FAILED] = "socks_auth_failed",
    [HV_D_SOCKS_GENERAL_FAILURE] = "socks_general_failure",
    [HV_D_SOCKS_NOT_ALLOWED] = "socks_not_allowed_by_ruleset",
    [HV_D_SOCKS_NETWORK_UNREACHABLE] = "socks_network_unreachable",
    [HV_D_SOCKS_HOST_UNREACHABLE] = "socks_host_unreachable",
    [HV_D_SOCKS_CONNECTION_REFUSED] = "socks_connection_refused",
    [HV_D_SOCKS_TTL_EXPIRED] = "socks_ttl_expired",
    [HV_D_SOCKS_COMMAND_NOT_SUPPORTED] = "socks_command_not_supported",
    [HV_D_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED] = "socks_address_type_not_supported",
    [HV_D_SOCKS_BAD_REPLY] = "socks_bad_reply",

    [HV_D_BLOCK_SAME_BODY] = "same_body_as_<n>_urls",
    [HV_D_BLOCK_STATUS_BURST] = "status_burst_<status>",
    [HV_D_BLOCK_SIZE_COLLAPSE] = "size_collapse",
    [HV_D_BLOCK_ONE_TITLE] = "one_title",
    [HV_D_BLOCK_RATIO_TURN] = "ratio_turn",
};

const char *hv_detail_str(hv_detail_t d)
{
    /* A value past the table, or a hole left when the enum grew: "" rather than NULL. */
    if ((unsigned)d >= HV_D__COUNT || hv_details[d] == NULL)
        return "";
    return hv_details[d];
}

int hv_detail_has_arg(hv_detail_t d)
{
    return strchr(hv_detail_str(d), '<') != NULL;
}

int hv_detail_format(char *out, size_t cap, hv_detail_t d, const char *arg)
{
    const char *text = hv_detail_str(d);
    const char *open = strchr(text, '<');
    const char *close = open != NULL ? strchr(open, '>') : NULL;
    if (close == NULL)
        return snprintf(out, cap, "%s", text);
    return snprintf(out, cap, "%.*s%s%s", (int)(open - text), text, arg != NULL ? arg : "",
                    close + 1);
}

void hv_fault_set(hv_fault_t *f, hv_detail_t code, const char *arg)
{
    f->code = code;
    snprintf(f->arg, sizeof(f->arg), "%s", arg != NULL ? arg : "");
}

void hv_fault_setf(hv_fault_t *f, hv_detail_t code, const char *fmt, ...)
{
    va_list ap;
    f->code = code;
    va_start(ap, fmt);
    vsnprintf(f->arg, sizeof(f->arg), fmt, ap);
    va_end(ap);
}

void hv_detail_duration(char *out, size_t cap, uint64_t ms)
{
    if (ms % 1000 == 0)
        snprintf(out, cap, "%" PRIu64 "s", ms / 1000);
    else
        snprintf(out, cap, "%" PRIu64 "ms", ms);
}
