/*
 * charset.c: deciding a page's encoding (BOM, Content-Type, <meta> prescan, UTF-8 check) and
 * decoding it to UTF-8.
 *
 * Decoders by family: UTF-8 is validated and repaired by utf8.c; UTF-16, windows-1252,
 * x-user-defined and "replacement" are small enough to do here; other single-byte encodings
 * become a 256-entry table filled from glibc's iconv at the start of each call; multi-byte
 * encodings stream through iconv() in a loop that replaces invalid input with U+FFFD.
 * Nothing here keeps state between calls, so parse workers may call it concurrently.
 */
#include "harvestd/charset.h"

#include <errno.h>
#include <iconv.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/prescan.h"
#include "harvestd/utf8.h"

/* The HTML standard looks for <meta> in this many leading bytes only. */
#define HV_CHARSET_PRESCAN_MAX 1024
/* Longer than the longest WHATWG label ("cseucpkdfmtjapanese", 19 bytes). */
#define HV_CHARSET_LABEL_MAX 24

#define HV_CHARSET_REPLACEMENT_CHAR 0xFFFD
/* Input bytes per iconv() call; far longer than any multi-byte sequence or escape. */
#define HV_CHARSET_ICONV_WINDOW 1024

/* The encodings of the WHATWG Encoding Standard, in the standard's order. */
enum {
    HV_CS_UTF_8,
    HV_CS_IBM866,
    HV_CS_ISO_8859_2,
    HV_CS_ISO_8859_3,
    HV_CS_ISO_8859_4,
    HV_CS_ISO_8859_5,
    HV_CS_ISO_8859_6,
    HV_CS_ISO_8859_7,
    HV_CS_ISO_8859_8,
    HV_CS_ISO_8859_8_I,
    HV_CS_ISO_8859_10,
    HV_CS_ISO_8859_13,
    HV_CS_ISO_8859_14,
    HV_CS_ISO_8859_15,
    HV_CS_ISO_8859_16,
    HV_CS_KOI8_R,
    HV_CS_KOI8_U,
    HV_CS_MACINTOSH,
    HV_CS_WINDOWS_874,
    HV_CS_WINDOWS_1250,
    HV_CS_WINDOWS_1251,
    HV_CS_WINDOWS_1252,
    HV_CS_WINDOWS_1253,
    HV_CS_WINDOWS_1254,
    HV_CS_WINDOWS_1255,
    HV_CS_WINDOWS_1256,
    HV_CS_WINDOWS_1257,
    HV_CS_WINDOWS_1258,
    HV_CS_X_MAC_CYRILLIC,
    HV_CS_GBK,
    HV_CS_GB18030,
    HV_CS_BIG5,
    HV_CS_EUC_JP,
    HV_CS_ISO_2022_JP,
    HV_CS_SHIFT_JIS,
    HV_CS_EUC_KR,
    HV_CS_REPLACEMENT,
    HV_CS_UTF_16BE,
    HV_CS_UTF_16LE,
    HV_CS_X_USER_DEFINED,
    HV_CS_COUNT
};

/* How an encoding is decoded. */
typedef enum {
    HV_CS_KIND_UTF8,
    HV_CS_KIND_UTF16LE,
    HV_CS_KIND_UTF16BE,
    HV_CS_KIND_WIN1252,     /* our own table: glibc rejects five bytes WHATWG maps */
    HV_CS_KIND_XUSER,       /* x-user-defined: arithmetic, no table */
    HV_CS_KIND_REPLACEMENT, /* the whole input becomes one U+FFFD */
    HV_CS_KIND_SBCS,        /* other single-byte encodings: table built from iconv */
    HV_CS_KIND_MBCS,        /* multi-byte encodings: streamed through iconv */
} hv_charset_kind_t;

/*
 * Byte structure of the multi-byte encodings, used to skip an invalid sequence as a whole
 * when iconv stops at it (WHATWG decoders swallow a lead byte together with a non-ASCII
 * trail byte, and give an ASCII trail byte back to be decoded on its own).
 */
typedef enum {
    HV_CS_MB_NONE,
    HV_CS_MB_SJIS,     /* leads 81..9F and E0..FC */
    HV_CS_MB_GB18030,  /* leads 81..FE; four-byte forms; 0x80 is the euro sign */
    HV_CS_MB_EUC,      /* leads 81..FE (Big5, EUC-KR) */
    HV_CS_MB_EUCJP,    /* leads 8E, A1..FE; 8F starts a three-byte JIS X 0212 form */
    HV_CS_MB_STATEFUL, /* ISO-2022-JP: escape sequences; skip one byte at a time */
} hv_charset_mb_t;

typedef struct {
    const char *name;       /* WHATWG name, lower case */
    const char *iconv_name; /* glibc converter, or NULL when decoded here */
    uint8_t kind;           /* hv_charset_kind_t */
    uint8_t mb;             /* hv_charset_mb_t */
    uint8_t c1_holes;       /* bytes 80..9F that glibc leaves undefined are C1 controls */
} hv_charset_enc_t;

/*
 * glibc converter choices where the name alone would be wrong:
 * - shift_jis is CP932: glibc's SHIFT_JIS turns 0x5C into YEN SIGN and lacks the Microsoft
 *   extensions that WHATWG's index has.
 * - gbk uses GB18030, because WHATWG defines gbk's decoder as gb18030's (glibc's GBK rejects
 *   A2E3, the euro sign, and every four-byte form).
 * - big5 is BIG5-HKSCS and euc-kr is CP949 (UHC), the supersets that WHATWG's indexes cover.
 * - iso-8859-8-i differs from iso-8859-8 only in the direction of display, not in bytes.
 * - koi8-u uses KOI8-U plus two corrections below: glibc's KOI8-RU would also change 80..9F.
 */
static const hv_charset_enc_t hv_charset_encs[HV_CS_COUNT] = {
    [HV_CS_UTF_8] = {"utf-8", NULL, HV_CS_KIND_UTF8, HV_CS_MB_NONE, 0},
    [HV_CS_IBM866] = {"ibm866", "IBM866", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_2] = {"iso-8859-2", "ISO-8859-2", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_3] = {"iso-8859-3", "ISO-8859-3", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_4] = {"iso-8859-4", "ISO-8859-4", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_5] = {"iso-8859-5", "ISO-8859-5", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_6] = {"iso-8859-6", "ISO-8859-6", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_7] = {"iso-8859-7", "ISO-8859-7", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_8] = {"iso-8859-8", "ISO-8859-8", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_8_I] = {"iso-8859-8-i", "ISO-8859-8", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_10] = {"iso-8859-10", "ISO-8859-10", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_13] = {"iso-8859-13", "ISO-8859-13", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_14] = {"iso-8859-14", "ISO-8859-14", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_15] = {"iso-8859-15", "ISO-8859-15", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_ISO_8859_16] = {"iso-8859-16", "ISO-8859-16", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_KOI8_R] = {"koi8-r", "KOI8-R", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_KOI8_U] = {"koi8-u", "KOI8-U", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_MACINTOSH] = {"macintosh", "MACINTOSH", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_WINDOWS_874] = {"windows-874", "CP874", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1250] = {"windows-1250", "CP1250", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1251] = {"windows-1251", "CP1251", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1252] = {"windows-1252", NULL, HV_CS_KIND_WIN1252, HV_CS_MB_NONE, 0},
    [HV_CS_WINDOWS_1253] = {"windows-1253", "CP1253", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1254] = {"windows-1254", "CP1254", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1255] = {"windows-1255", "CP1255", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1256] = {"windows-1256", "CP1256", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1257] = {"windows-1257", "CP1257", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_WINDOWS_1258] = {"windows-1258", "CP1258", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 1},
    [HV_CS_X_MAC_CYRILLIC] = {"x-mac-cyrillic", "MAC-CYRILLIC", HV_CS_KIND_SBCS, HV_CS_MB_NONE, 0},
    [HV_CS_GBK] = {"gbk", "GB18030", HV_CS_KIND_MBCS, HV_CS_MB_GB18030, 0},
    [HV_CS_GB18030] = {"gb18030", "GB18030", HV_CS_KIND_MBCS, HV_CS_MB_GB18030, 0},
    [HV_CS_BIG5] = {"big5", "BIG5-HKSCS", HV_CS_KIND_MBCS, HV_CS_MB_EUC, 0},
    [HV_CS_EUC_JP] = {"euc-jp", "EUC-JP", HV_CS_KIND_MBCS, HV_CS_MB_EUCJP, 0},
    [HV_CS_ISO_2022_JP] = {"iso-2022-jp", "ISO-2022-JP", HV_CS_KIND_MBCS, HV_CS_MB_STATEFUL, 0},
    [HV_CS_SHIFT_JIS] = {"shift_jis", "CP932", HV_CS_KIND_MBCS, HV_CS_MB_SJIS, 0},
    [HV_CS_EUC_KR] = {"euc-kr", "CP949", HV_CS_KIND_MBCS, HV_CS_MB_EUC, 0},
    [HV_CS_REPLACEMENT] = {"replacement", NULL, HV_CS_KIND_REPLACEMENT, HV_CS_MB_NONE, 0},
    [HV_CS_UTF_16BE] = {"utf-16be", NULL, HV_CS_KIND_UTF16BE, HV_CS_MB_NONE, 0},
    [HV_CS_UTF_16LE] = {"utf-16le", NULL, HV_CS_KIND_UTF16LE, HV_CS_MB_NONE, 0},
    [HV_CS_X_USER_DEFINED] = {"x-user-defined", NULL, HV_CS_KIND_XUSER, HV_CS_MB_NONE, 0},
};

/*
 * Every label of the WHATWG Encoding Standard ("Names and labels"), sorted by strcmp() for
 * bsearch(). Keep it sorted when adding a label; the unit test resolves every one of them.
 */
typedef struct {
    const char *label;
    uint8_t enc;
} hv_charset_label_t;

static const hv_charset_label_t hv_charset_labels[] = {
    {"866", HV_CS_IBM866}, {"ansi_x3.4-1968", HV_CS_WINDOWS_1252}, {"arabic", HV_CS_ISO_8859_6},
    {"ascii", HV_CS_WINDOWS_1252}, {"asmo-708", HV_CS_ISO_8859_6}, {"big5", HV_CS_BIG5},
    {"big5-hkscs", HV_CS_BIG5}, {"chinese", HV_CS_GBK}, {"cn-big5", HV_CS_BIG5},
    {"cp1250", HV_CS_WINDOWS_1250}, {"cp1251", HV_CS_WINDOWS_1251}, {"cp1252", HV_CS_WINDOWS_1252},
    {"cp1253", HV_CS_WINDOWS_1253}, {"cp1254", HV_CS_WINDOWS_1254}, {"cp1255", HV_CS_WINDOWS_1255},
    {"cp1256", HV_CS_WINDOWS_1256}, {"cp1257", HV_CS_WINDOWS_1257}, {"cp1258", HV_CS_WINDOWS_1258},
    {"cp819", HV_CS_WINDOWS_1252}, {"cp866", HV_CS_IBM866}, {"csbig5", HV_CS_BIG5},
    {"cseuckr", HV_CS_EUC_KR}, {"cseucpkdfmtjapanese", HV_CS_EUC_JP}, {"csgb2312", HV_CS_GBK},
    {"csibm866", HV_CS_IBM866}, {"csiso2022jp", HV_CS_ISO_2022_JP},
    {"csiso2022kr", HV_CS_REPLACEMENT}, {"csiso58gb231280", HV_CS_GBK},
    {"csiso88596e", HV_CS_ISO_8859_6}, {"csiso88596i", HV_CS_ISO_8859_6},
    {"csiso88598e", HV_CS_ISO_8859_8}, {"csiso88598i", HV_CS_ISO_8859_8_I},
    {"csisolatin1", HV_CS_WINDOWS_1252}, {"csisolatin2", HV_CS_ISO_8859_2},
    {"csisolatin3", HV_CS_ISO_8859_3}, {"csisolatin4", HV_CS_ISO_8859_4},
    {"csisolatin5", HV_CS_WINDOWS_1254}, {"csisolatin6", HV_CS_ISO_8859_10},
    {"csisolatin9", HV_CS_ISO_8859_15}, {"csisolatinarabic", HV_CS_ISO_8859_6},
    {"csisolatincyrillic", HV_CS_ISO_8859_5}, {"csisolatingreek", HV_CS_ISO_8859_7},
    {"csisolatinhebrew", HV_CS_ISO_8859_8}, {"cskoi8r", HV_CS_KOI8_R},
    {"csksc56011987", HV_CS_EUC_KR}, {"csmacintosh", HV_CS_MACINTOSH},
    {"csshiftjis", HV_CS_SHIFT_JIS}, {"csunicode", HV_CS_UTF_16LE}, {"cyrillic", HV_CS_ISO_8859_5},
    {"dos-874", HV_CS_WINDOWS_874}, {"ecma-114", HV_CS_ISO_8859_6}, {"ecma-118", HV_CS_ISO_8859_7},
    {"elot_928", HV_CS_ISO_8859_7}, {"euc-jp", HV_CS_EUC_JP}, {"euc-kr", HV_CS_EUC_KR},
    {"gb18030", HV_CS_GB18030}, {"gb2312", HV_CS_GBK}, {"gb_2312", HV_CS_GBK},
    {"gb_2312-80", HV_CS_GBK}, {"gbk", HV_CS_GBK}, {"greek", HV_CS_ISO_8859_7},
    {"greek8", HV_CS_ISO_8859_7}, {"hebrew", HV_CS_ISO_8859_8}, {"hz-gb-2312", HV_CS_REPLACEMENT},
    {"ibm819", HV_CS_WINDOWS_1252}, {"ibm866", HV_CS_IBM866}, {"iso-10646-ucs-2", HV_CS_UTF_16LE},
    {"iso-2022-cn", HV_CS_REPLACEMENT}, {"iso-2022-cn-ext", HV_CS_REPLACEMENT},
    {"iso-2022-jp", HV_CS_ISO_2022_JP}, {"iso-2022-kr", HV_CS_REPLACEMENT},
    {"iso-8859-1", HV_CS_WINDOWS_1252}, {"iso-8859-10", HV_CS_ISO_8859_10},
    {"iso-8859-11", HV_CS_WINDOWS_874}, {"iso-8859-13", HV_CS_ISO_8859_13},
    {"iso-8859-14", HV_CS_ISO_8859_14}, {"iso-8859-15", HV_CS_ISO_8859_15},
    {"iso-8859-16", HV_CS_ISO_8859_16}, {"iso-8859-2", HV_CS_ISO_8859_2},
    {"iso-8859-3", HV_CS_ISO_8859_3}, {"iso-8859-4", HV_CS_ISO_8859_4},
    {"iso-8859-5", HV_CS_ISO_8859_5}, {"iso-8859-6", HV_CS_ISO_8859_6},
    {"iso-8859-6-e", HV_CS_ISO_8859_6}, {"iso-8859-6-i", HV_CS_ISO_8859_6},
    {"iso-8859-7", HV_CS_ISO_8859_7}, {"iso-8859-8", HV_CS_ISO_8859_8},
    {"iso-8859-8-e", HV_CS_ISO_8859_8}, {"iso-8859-8-i", HV_CS_ISO_8859_8_I},
    {"iso-8859-9", HV_CS_WINDOWS_1254}, {"iso-ir-100", HV_CS_WINDOWS_1252},
    {"iso-ir-101", HV_CS_ISO_8859_2}, {"iso-ir-109", HV_CS_ISO_8859_3},
    {"iso-ir-110", HV_CS_ISO_8859_4}, {"iso-ir-126", HV_CS_ISO_8859_7},
    {"iso-ir-127", HV_CS_ISO_8859_6}, {"iso-ir-138", HV_CS_ISO_8859_8},
    {"iso-ir-144", HV_CS_ISO_8859_5}, {"iso-ir-148", HV_CS_WINDOWS_1254},
    {"iso-ir-149", HV_CS_EUC_KR}, {"iso-ir-157", HV_CS_ISO_8859_10}, {"iso-ir-58", HV_CS_GBK},
    {"iso8859-1", HV_CS_WINDOWS_1252}, {"iso8859-10", HV_CS_ISO_8859_10},
    {"iso8859-11", HV_CS_WINDOWS_874}, {"iso8859-13", HV_CS_ISO_8859_13},
    {"iso8859-14", HV_CS_ISO_8859_14}, {"iso8859-15", HV_CS_ISO_8859_15},
    {"iso8859-2", HV_CS_ISO_8859_2}, {"iso8859-3", HV_CS_ISO_8859_3},
    {"iso8859-4", HV_CS_ISO_8859_4}, {"iso8859-5", HV_CS_ISO_8859_5},
    {"iso8859-6", HV_CS_ISO_8859_6}, {"iso8859-7", HV_CS_ISO_8859_7},
    {"iso8859-8", HV_CS_ISO_8859_8}, {"iso8859-9", HV_CS_WINDOWS_1254},
    {"iso88591", HV_CS_WINDOWS_1252}, {"iso885910", HV_CS_ISO_8859_10},
    {"iso885911", HV_CS_WINDOWS_874}, {"iso885913", HV_CS_ISO_8859_13},
    {"iso885914", HV_CS_ISO_8859_14}, {"iso885915", HV_CS_ISO_8859_15},
    {"iso88592", HV_CS_ISO_8859_2}, {"iso88593", HV_CS_ISO_8859_3}, {"iso88594", HV_CS_ISO_8859_4},
    {"iso88595", HV_CS_ISO_8859_5}, {"iso88596", HV_CS_ISO_8859_6}, {"iso88597", HV_CS_ISO_8859_7},
    {"iso88598", HV_CS_ISO_8859_8}, {"iso88599", HV_CS_WINDOWS_1254},
    {"iso_8859-1", HV_CS_WINDOWS_1252}, {"iso_8859-15", HV_CS_ISO_8859_15},
    {"iso_8859-1:1987", HV_CS_WINDOWS_1252}, {"iso_8859-2", HV_CS_ISO_8859_2},
    {"iso_8859-2:1987", HV_CS_ISO_8859_2}, {"iso_8859-3", HV_CS_ISO_8859_3},
    {"iso_8859-3:1988", HV_CS_ISO_8859_3}, {"iso_8859-4", HV_CS_ISO_8859_4},
    {"iso_8859-4:1988", HV_CS_ISO_8859_4}, {"iso_8859-5", HV_CS_ISO_8859_5},
    {"iso_8859-5:1988", HV_CS_ISO_8859_5}, {"iso_8859-6", HV_CS_ISO_8859_6},
    {"iso_8859-6:1987", HV_CS_ISO_8859_6}, {"iso_8859-7", HV_CS_ISO_8859_7},
    {"iso_8859-7:1987", HV_CS_ISO_8859_7}, {"iso_8859-8", HV_CS_ISO_8859_8},
    {"iso_8859-8:1988", HV_CS_ISO_8859_8}, {"iso_8859-9", HV_CS_WINDOWS_1254},
    {"iso_8859-9:1989", HV_CS_WINDOWS_1254}, {"koi", HV_CS_KOI8_R}, {"koi8", HV_CS_KOI8_R},
    {"koi8-r", HV_CS_KOI8_R}, {"koi8-ru", HV_CS_KOI8_U}, {"koi8-u", HV_CS_KOI8_U},
    {"koi8_r", HV_CS_KOI8_R}, {"korean", HV_CS_EUC_KR}, {"ks_c_5601-1987", HV_CS_EUC_KR},
    {"ks_c_5601-1989", HV_CS_EUC_KR}, {"ksc5601", HV_CS_EUC_KR}, {"ksc_5601", HV_CS_EUC_KR},
    {"l1", HV_CS_WINDOWS_1252}, {"l2", HV_CS_ISO_8859_2}, {"l3", HV_CS_ISO_8859_3},
    {"l4", HV_CS_ISO_8859_4}, {"l5", HV_CS_WINDOWS_1254}, {"l6", HV_CS_ISO_8859_10},
    {"l9", HV_CS_ISO_8859_15}, {"latin1", HV_CS_WINDOWS_1252}, {"latin2", HV_CS_ISO_8859_2},
    {"latin3", HV_CS_ISO_8859_3}, {"latin4", HV_CS_ISO_8859_4}, {"latin5", HV_CS_WINDOWS_1254},
    {"latin6", HV_CS_ISO_8859_10}, {"logical", HV_CS_ISO_8859_8_I}, {"mac", HV_CS_MACINTOSH},
    {"macintosh", HV_CS_MACINTOSH}, {"ms932", HV_CS_SHIFT_JIS}, {"ms_kanji", HV_CS_SHIFT_JIS},
    {"replacement", HV_CS_REPLACEMENT}, {"shift-jis", HV_CS_SHIFT_JIS},
    {"shift_jis", HV_CS_SHIFT_JIS}, {"sjis", HV_CS_SHIFT_JIS}, {"sun_eu_greek", HV_CS_ISO_8859_7},
    {"tis-620", HV_CS_WINDOWS_874}, {"ucs-2", HV_CS_UTF_16LE}, {"unicode", HV_CS_UTF_16LE},
    {"unicode-1-1-utf-8", HV_CS_UTF_8}, {"unicode11utf8", HV_CS_UTF_8},
    {"unicode20utf8", HV_CS_UTF_8}, {"unicodefeff", HV_CS_UTF_16LE},
    {"unicodefffe", HV_CS_UTF_16BE}, {"us-ascii", HV_CS_WINDOWS_1252}, {"utf-16", HV_CS_UTF_16LE},
    {"utf-16be", HV_CS_UTF_16BE}, {"utf-16le", HV_CS_UTF_16LE}, {"utf-8", HV_CS_UTF_8},
    {"utf8", HV_CS_UTF_8}, {"visual", HV_CS_ISO_8859_8}, {"windows-1250", HV_CS_WINDOWS_1250},
    {"windows-1251", HV_CS_WINDOWS_1251}, {"windows-1252", HV_CS_WINDOWS_1252},
    {"windows-1253", HV_CS_WINDOWS_1253}, {"windows-1254", HV_CS_WINDOWS_1254},
    {"windows-1255", HV_CS_WINDOWS_1255}, {"windows-1256", HV_CS_WINDOWS_1256},
    {"windows-1257", HV_CS_WINDOWS_1257}, {"windows-1258", HV_CS_WINDOWS_1258},
    {"windows-31j", HV_CS_SHIFT_JIS}, {"windows-874", HV_CS_WINDOWS_874},
    {"windows-949", HV_CS_EUC_KR}, {"x-cp1250", HV_CS_WINDOWS_1250},
    {"x-cp1251", HV_CS_WINDOWS_1251}, {"x-cp1252", HV_CS_WINDOWS_1252},
    {"x-cp1253", HV_CS_WINDOWS_1253}, {"x-cp1254", HV_CS_WINDOWS_1254},
    {"x-cp1255", HV_CS_WINDOWS_1255}, {"x-cp1256", HV_CS_WINDOWS_1256},
    {"x-cp1257", HV_CS_WINDOWS_1257}, {"x-cp1258", HV_CS_WINDOWS_1258}, {"x-euc-jp", HV_CS_EUC_JP},
    {"x-gbk", HV_CS_GBK}, {"x-mac-cyrillic", HV_CS_X_MAC_CYRILLIC},
    {"x-mac-roman", HV_CS_MACINTOSH}, {"x-mac-ukrainian", HV_CS_X_MAC_CYRILLIC},
    {"x-sjis", HV_CS_SHIFT_JIS}, {"x-unicode20utf8", HV_CS_UTF_8},
    {"x-user-defined", HV_CS_X_USER_DEFINED}, {"x-x-big5", HV_CS_BIG5},
};

/* Where WHATWG's index for a single-byte encoding differs from glibc's table. */
typedef struct {
    uint8_t enc;
    uint8_t byte;
    uint16_t cp;
} hv_charset_fixup_t;

static const hv_charset_fixup_t hv_charset_fixups[] = {
    {HV_CS_WINDOWS_1255, 0xCA, 0x05BA},   /* HEBREW POINT HOLAM HASER FOR VAV */
    {HV_CS_KOI8_U, 0xAE, 0x045E},         /* CYRILLIC SMALL LETTER SHORT U */
    {HV_CS_KOI8_U, 0xBE, 0x040E},         /* CYRILLIC CAPITAL LETTER SHORT U */
    {HV_CS_X_MAC_CYRILLIC, 0xFF, 0x20AC}, /* EURO SIGN where glibc has CURRENCY SIGN */
};

/* windows-1252 bytes 80..9F; A0..FF are U+00A0..U+00FF. WHATWG maps the five bytes Windows
 * leaves undefined (81, 8D, 8F, 90, 9D) to the C1 controls of the same value. */
static const uint16_t hv_charset_win1252_c1[32] = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
    0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
    0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
    0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
};

/* ---- small helpers --------------------------------------------------------------------------- */

/* Encode one code point (at most U+10FFFF, no surrogates) as UTF-8; returns its length. */
static size_t hv_charset_encode(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the UTF-8 sequence that `lead` starts (for a valid lead byte). */
static size_t hv_charset_utf8_len(unsigned char lead)
{
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/* ---- output buffer --------------------------------------------------------------------------- */

/* Growable UTF-8 output. Its size follows the input, which the http layer already bounded, so
 * it uses the aborting allocators like hv_utf8_sanitize() does. */
typedef struct {
    char *buf;
    size_t len;
    size_t cap;
} hv_charset_out_t;

/* Make room for `extra` more bytes plus the final NUL. Capacity doubles, so a long run of
 * small appends stays linear. */
static void hv_charset_out_reserve(hv_charset_out_t *o, size_t extra)
{
    if (o->cap - o->len > extra)
        return;
    size_t cap = o->cap > 0 ? o->cap : 64;
    if (extra > SIZE_MAX / 4 || o->len > SIZE_MAX / 4 - extra) {
        cap = SIZE_MAX; /* no bounded page gets here; hv_xrealloc() reports the failure */
    } else {
        while (cap < o->len + extra + 1)
            cap *= 2;
    }
    o->buf = hv_xrealloc(o->buf, cap);
    o->cap = cap;
}

static void hv_charset_out_cp(hv_charset_out_t *o, uint32_t cp)
{
    hv_charset_out_reserve(o, 4);
    o->len += hv_charset_encode(cp, (unsigned char *)o->buf + o->len);
}

/* Hand the buffer over as a NUL-terminated string, trimmed when over a quarter is unused. */
static char *hv_charset_out_finish(hv_charset_out_t *o, size_t *len)
{
    hv_charset_out_reserve(o, 0);
    o->buf[o->len] = '\0';
    if (o->cap - o->len > o->len / 4 + 64)
        o->buf = hv_xrealloc(o->buf, o->len + 1);
    *len = o->len;
    char *s = o->buf;
    o->buf = NULL;
    o->len = o->cap = 0;
    return s;
}

/* ---- labels ---------------------------------------------------------------------------------- */

static int hv_charset_label_cmp(const void *key, const void *elem)
{
    const hv_charset_label_t *l = elem;
    return strcmp(key, l->label);
}

static const hv_charset_enc_t *hv_charset_lookup(const char *label, size_t len)
{
    if (label == NULL)
        return NULL;
    const unsigned char *s = (const unsigned char *)label;
    while (len > 0 && hv_ascii_is_space(s[0])) {
        s++;
        len--;
    }
    while (len > 0 && hv_ascii_is_space(s[len - 1]))
        len--;
    if (len == 0 || len >= HV_CHARSET_LABEL_MAX)
        return NULL;

    char key[HV_CHARSET_LABEL_MAX];
    for (size_t i = 0; i < len; i++)
        key[i] = (char)hv_ascii_lower(s[i]);
    key[len] = '\0';
    if (strlen(key) != len)
        return NULL; /* an embedded NUL never names an encoding */

    const hv_charset_label_t *hit =
        bsearch(key, hv_charset_labels, HV_ARRAY_SIZE(hv_charset_labels),
                sizeof(hv_charset_labels[0]), hv_charset_label_cmp);
    return hit != NULL ? &hv_charset_encs[hit->enc] : NULL;
}

const char *hv_charset_label(const char *label, size_t len)
{
    const hv_charset_enc_t *enc = hv_charset_lookup(label, len);
    return enc != NULL ? enc->name : NULL;
}

/* ---- evidence: BOM, Content-Type ------------------------------------------------------------- */

static const hv_charset_enc_t *hv_charset_sniff_bom(const unsigned char *s, size_t n, size_t *bom)
{
    if (n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) {
        *bom = 3;
        return &hv_charset_encs[HV_CS_UTF_8];
    }
    if (n >= 2 && s[0] == 0xFE && s[1] == 0xFF) {
        *bom = 2;
        return &hv_charset_encs[HV_CS_UTF_16BE];
    }
    if (n >= 2 && s[0] == 0xFF && s[1] == 0xFE) {
        *bom = 2;
        return &hv_charset_encs[HV_CS_UTF_16LE];
    }
    return NULL;
}

static int hv_charset_is_http_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * The charset parameter of a Content-Type value, parsed as leniently as browsers do: names
 * match case-insensitively, whitespace around '=' is skipped, values may be quoted (with
 * backslash escapes), and a quoted value may contain ';' or "charset=" without confusing us.
 * As in the Fetch standard, the first charset parameter decides, even when its label is
 * unknown.
 */
static const hv_charset_enc_t *hv_charset_from_content_type(const char *ct)
{
    const char *p = strchr(ct, ';');

    while (p != NULL && *p == ';') {
        p++;
        while (hv_charset_is_http_space(*p))
            p++;
        const char *name = p;
        while (*p != '\0' && *p != ';' && *p != '=')
            p++;
        const char *name_end = p;
        while (name_end > name && hv_charset_is_http_space(name_end[-1]))
            name_end--;
        if (*p != '=')
            continue; /* a parameter without a value; p is at ';' or the end */
        p++;
        while (hv_charset_is_http_space(*p))
            p++;

        char quoted[HV_CHARSET_LABEL_MAX];
        const char *value;
        size_t value_len;
        int too_long = 0;
        if (*p == '"') {
            size_t n = 0;
            for (p++; *p != '\0' && *p != '"'; p++) {
                if (*p == '\\' && p[1] != '\0')
                    p++;
                if (n < sizeof(quoted))
                    quoted[n++] = *p;
                else
                    too_long = 1;
            }
            value = quoted;
            value_len = n;
            while (*p != '\0' && *p != ';')
                p++;
        } else {
            value = p;
            while (*p != '\0' && *p != ';')
                p++;
            value_len = (size_t)(p - value);
        }

        if (hv_ascii_case_is(name, (size_t)(name_end - name), "charset"))
            return too_long ? NULL : hv_charset_lookup(value, value_len);
    }
    return NULL;
}

/* ---- evidence: the HTML prescan -------------------------------------------------------------- */

/* The HTML standard's "algorithm for extracting a character encoding from a meta element",
 * applied to a content attribute ("text/html; charset=shift_jis"). */
static const hv_charset_enc_t *hv_charset_from_meta_content(const char *v, size_t n)
{
    size_t i = 0;

    for (;;) {
        const char *hit = NULL;
        for (; i + 7 <= n; i++) {
            if (hv_ascii_case_prefix(v + i, n - i, "charset")) {
                hit = v + i;
                break;
            }
        }
        if (hit == NULL)
            return NULL;
        i += 7;
        while (i < n && hv_ascii_is_space((unsigned char)v[i]))
            i++;
        if (i >= n || v[i] != '=')
            continue; /* "charsetfoo": look for the next occurrence from here */
        i++;
        while (i < n && hv_ascii_is_space((unsigned char)v[i]))
            i++;
        if (i >= n)
            return NULL;
        if (v[i] == '"' || v[i] == '\'') {
            const char *end = memchr(v + i + 1, v[i], n - i - 1);
            if (end == NULL)
                return NULL;
            return hv_charset_lookup(v + i + 1, (size_t)(end - (v + i + 1)));
        }
        size_t start = i;
        while (i < n && !hv_ascii_is_space((unsigned char)v[i]) && v[i] != ';')
            i++;
        return hv_charset_lookup(v + start, i - start);
    }
}

/*
 * The attributes of a <meta> tag whose name ends just before *pos. Returns the encoding it
 * declares, or NULL; *pos is left at the tag's '>', or *ended is set when the bytes run out
 * first. The standard's "get an attribute" walks a tag as the HTML tokenizer does, which is
 * the pre-scan's walk; it lower-cases names and values, so they are compared here ignoring
 * ASCII case.
 */
static const hv_charset_enc_t *hv_charset_meta_tag(const unsigned char *s, size_t n, size_t *pos,
                                                   int *ended)
{
    const char *text = (const char *)s;
    hv_prescan_attr_t a;
    const hv_charset_enc_t *charset = NULL;
    int charset_set = 0;  /* a charset (or content) attribute already decided `charset` */
    int need_pragma = -1; /* -1: no declaration seen; 1: content= needs http-equiv */
    int got_pragma = 0;
    int seen_http_equiv = 0, seen_content = 0, seen_charset = 0;

    for (;;) {
        int r = hv_prescan_read_attr(text, n, pos, &a);
        if (r < 0) {
            *ended = 1;
            return NULL;
        }
        if (r == 0)
            break;
        const char *name = text + a.name, *value = text + a.value;
        /* Only the first occurrence of an attribute counts, as in an HTML parser. */
        if (hv_ascii_case_is(name, a.name_len, "http-equiv")) {
            if (seen_http_equiv++)
                continue;
            if (hv_ascii_case_is(value, a.value_len, "content-type"))
                got_pragma = 1;
        } else if (hv_ascii_case_is(name, a.name_len, "content")) {
            if (seen_content++)
                continue;
            const hv_charset_enc_t *enc = hv_charset_from_meta_content(value, a.value_len);
            if (enc != NULL && !charset_set) {
                charset = enc;
                charset_set = 1;
                need_pragma = 1;
            }
        } else if (hv_ascii_case_is(name, a.name_len, "charset")) {
            if (seen_charset++)
                continue;
            charset = hv_charset_lookup(value, a.value_len);
            charset_set = 1;
            need_pragma = 0;
        }
    }

    if (need_pragma < 0 || (need_pragma == 1 && !got_pragma) || charset == NULL)
        return NULL;
    /* A page whose <meta> could be read as ASCII is not UTF-16, and x-user-defined is a
     * trick for binary data in scripts, not a page encoding: the HTML standard turns the
     * first into UTF-8 and the second into windows-1252. */
    if (charset->kind == HV_CS_KIND_UTF16LE || charset->kind == HV_CS_KIND_UTF16BE)
        return &hv_charset_encs[HV_CS_UTF_8];
    if (charset->kind == HV_CS_KIND_XUSER)
        return &hv_charset_encs[HV_CS_WINDOWS_1252];
    return charset;
}

/*
 * The HTML standard's "get an XML encoding": `<?xml version="1.0" encoding="Shift_JIS"?>` at
 * the very start, which browsers honour when no <meta> says otherwise.
 */
static const hv_charset_enc_t *hv_charset_xml_decl(const unsigned char *s, size_t n)
{
    if (n < 5 || memcmp(s, "<?xml", 5) != 0)
        return NULL;
    const unsigned char *gt = memchr(s, '>', n);
    if (gt == NULL)
        return NULL;
    size_t end = (size_t)(gt - s);
    size_t i = 5;
    for (;; i++) {
        if (i + 8 > end)
            return NULL;
        if (hv_ascii_case_prefix((const char *)s + i, end - i, "encoding"))
            break;
    }
    i += 8;
    while (i < end && s[i] <= 0x20)
        i++;
    if (i >= end || s[i] != '=')
        return NULL;
    i++;
    while (i < end && s[i] <= 0x20)
        i++;
    if (i >= end || (s[i] != '"' && s[i] != '\''))
        return NULL;
    const unsigned char *close = memchr(s + i + 1, s[i], end - i - 1);
    if (close == NULL)
        return NULL;
    const hv_charset_enc_t *enc =
        hv_charset_lookup((const char *)s + i + 1, (size_t)(close - (s + i + 1)));
    if (enc != NULL && (enc->kind == HV_CS_KIND_UTF16LE || enc->kind == HV_CS_KIND_UTF16BE))
        return &hv_charset_encs[HV_CS_UTF_8];
    return enc;
}

/*
 * The HTML standard's "prescan a byte stream to determine its encoding" over the first 1024
 * bytes: comments and the attributes of other tags are skipped the way a parser would skip
 * them, so a <meta> inside a comment or inside an attribute value does not count.
 */
static const hv_charset_enc_t *hv_charset_prescan(const unsigned char *s, size_t n)
{
    if (n > HV_CHARSET_PRESCAN_MAX)
        n = HV_CHARSET_PRESCAN_MAX;

    /* "<?x" in UTF-16 without a BOM: only a UTF-16 document starts like this. */
    if (n >= 6 && memcmp(s, "<\0?\0x\0", 6) == 0)
        return &hv_charset_encs[HV_CS_UTF_16LE];
    if (n >= 6 && memcmp(s, "\0<\0?\0x", 6) == 0)
        return &hv_charset_encs[HV_CS_UTF_16BE];

    size_t i = 0;
    while (i < n) {
        if (s[i] != '<') {
            i++;
            continue;
        }
        const unsigned char *t = s + i;
        size_t left = n - i;

        if (hv_ascii_case_prefix((const char *)t, left, "<!--")) {
            /* The comment ends at the first "-->", whose dashes may be those of "<!--". */
            size_t j = i + 4;
            while (j < n && !(s[j] == '>' && s[j - 1] == '-' && s[j - 2] == '-'))
                j++;
            if (j >= n)
                break;
            i = j + 1;
        } else if (left >= 6 && hv_ascii_case_prefix((const char *)t, left, "<meta") &&
                   (hv_ascii_is_space(t[5]) || t[5] == '/')) {
            int ended = 0;
            i += 5;
            const hv_charset_enc_t *enc = hv_charset_meta_tag(s, n, &i, &ended);
            if (enc != NULL)
                return enc;
            if (ended)
                break;
            i++; /* past the '>' */
        } else if ((left >= 2 && hv_ascii_is_alpha(t[1])) ||
                   (left >= 3 && t[1] == '/' && hv_ascii_is_alpha(t[2]))) {
            /* Any other tag: skip its name, then its attributes, quoted values included. */
            hv_prescan_attr_t a;
            int r;
            i++;
            while (i < n && !hv_ascii_is_space(s[i]) && s[i] != '>')
                i++;
            while ((r = hv_prescan_read_attr((const char *)s, n, &i, &a)) > 0)
                ;
            if (r < 0)
                break;
            i++;
        } else if (left >= 2 && (t[1] == '!' || t[1] == '/' || t[1] == '?')) {
            const unsigned char *gt = memchr(t + 1, '>', left - 1);
            if (gt == NULL)
                break;
            i = (size_t)(gt - s) + 1;
        } else {
            i++;
        }
    }
    return hv_charset_xml_decl(s, n);
}

/* ---- decoders -------------------------------------------------------------------------------- */

/* Byte -> UTF-8 for a single-byte encoding; unmapped bytes hold U+FFFD. */
typedef struct {
    unsigned char len[256];
    unsigned char seq[256][4];
} hv_charset_sbcs_t;

static void hv_charset_sbcs_set(hv_charset_sbcs_t *t, unsigned b, uint32_t cp)
{
    t->len[b] = (unsigned char)hv_charset_encode(cp, t->seq[b]);
}

/*
 * Fill the table of a single-byte encoding, asking iconv about each high byte on its own: that
 * also keeps glibc's CP1255 and CP1258 from composing a letter with the accent after it, which
 * WHATWG decoders do not do. Returns -1 if glibc has no such converter.
 */
static int hv_charset_sbcs_build(const hv_charset_enc_t *enc, hv_charset_sbcs_t *t)
{
    for (unsigned b = 0; b < 0x80; b++)
        hv_charset_sbcs_set(t, b, b);

    switch ((hv_charset_kind_t)enc->kind) {
    case HV_CS_KIND_WIN1252:
        for (unsigned b = 0x80; b < 0x100; b++)
            hv_charset_sbcs_set(t, b, b < 0xA0 ? hv_charset_win1252_c1[b - 0x80] : b);
        return 0;
    case HV_CS_KIND_XUSER:
        for (unsigned b = 0x80; b < 0x100; b++)
            hv_charset_sbcs_set(t, b, 0xF780 + b - 0x80);
        return 0;
    default:
        break;
    }

    iconv_t cd = iconv_open("UTF-8", enc->iconv_name);
    if (cd == (iconv_t)-1)
        return -1;
    for (unsigned b = 0x80; b < 0x100; b++) {
        char in = (char)b, out[16];
        char *inp = &in, *outp = out;
        size_t inleft = 1, outleft = sizeof(out);
        size_t r = iconv(cd, &inp, &inleft, &outp, &outleft);
        /* Flushing returns what a composing converter held back, and resets its state. */
        iconv(cd, NULL, NULL, &outp, &outleft);
        size_t n = (size_t)(outp - out);
        if (r != (size_t)-1 && n > 0 && n == hv_charset_utf8_len((unsigned char)out[0]) &&
            hv_utf8_valid(out, n)) {
            t->len[b] = (unsigned char)n;
            memcpy(t->seq[b], out, n);
        } else if (enc->c1_holes && b < 0xA0) {
            hv_charset_sbcs_set(t, b, b);
        } else {
            hv_charset_sbcs_set(t, b, HV_CHARSET_REPLACEMENT_CHAR);
        }
    }
    iconv_close(cd);

    size_t index = (size_t)(enc - hv_charset_encs);
    for (size_t k = 0; k < HV_ARRAY_SIZE(hv_charset_fixups); k++)
        if (hv_charset_fixups[k].enc == index)
            hv_charset_sbcs_set(t, hv_charset_fixups[k].byte, hv_charset_fixups[k].cp);
    return 0;
}

/* Two passes over the input, so the output is allocated once at its exact size. */
static char *hv_charset_sbcs_decode(const hv_charset_sbcs_t *t, const unsigned char *s, size_t n,
                                    size_t *out_len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += t->len[s[i]];

    char *out = hv_xmalloc(total + 1);
    unsigned char *o = (unsigned char *)out;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = s[i];
        if (b < 0x80) {
            *o++ = b;
        } else {
            memcpy(o, t->seq[b], t->len[b]);
            o += t->len[b];
        }
    }
    *o = '\0';
    *out_len = total;
    return out;
}

/* UTF-16 as WHATWG decodes it: an unpaired surrogate, or an odd byte at the end, is one
 * U+FFFD each. */
static char *hv_charset_utf16_decode(const unsigned char *s, size_t n, int big_endian,
                                     size_t *out_len)
{
    hv_charset_out_t o = {NULL, 0, 0};
    uint32_t lead = 0;

    /* Each code unit becomes at most three bytes; a pair of them becomes four. */
    hv_charset_out_reserve(&o, n / 2 * 3 + 3);
    for (size_t i = 0; i + 1 < n; i += 2) {
        uint32_t u = big_endian ? ((uint32_t)s[i] << 8 | s[i + 1])
                                : ((uint32_t)s[i + 1] << 8 | s[i]);
        if (lead != 0) {
            if (u >= 0xDC00 && u <= 0xDFFF) {
                hv_charset_out_cp(&o, 0x10000 + ((lead - 0xD800) << 10) + (u - 0xDC00));
                lead = 0;
                continue;
            }
            hv_charset_out_cp(&o, HV_CHARSET_REPLACEMENT_CHAR);
            lead = 0;
        }
        if (u >= 0xD800 && u <= 0xDBFF)
            lead = u;
        else if (u >= 0xDC00 && u <= 0xDFFF)
            hv_charset_out_cp(&o, HV_CHARSET_REPLACEMENT_CHAR);
        else
            hv_charset_out_cp(&o, u);
    }
    if (lead != 0 || n % 2 != 0)
        hv_charset_out_cp(&o, HV_CHARSET_REPLACEMENT_CHAR);
    return hv_charset_out_finish(&o, out_len);
}

/*
 * iconv stopped with EILSEQ at p: how many bytes make up the invalid sequence, and what to
 * write for them (U+FFFD, except for two single bytes WHATWG maps and glibc does not).
 * A lead byte followed by a non-ASCII byte is one error; followed by an ASCII byte it is an
 * error alone and the ASCII byte is decoded next, as WHATWG's decoders do.
 */
static size_t hv_charset_invalid_len(hv_charset_mb_t mb, const unsigned char *p, size_t n,
                                     uint32_t *cp)
{
    unsigned char b = p[0];
    int lead;

    *cp = HV_CHARSET_REPLACEMENT_CHAR;
    switch (mb) {
    case HV_CS_MB_SJIS:
        if (b == 0x80) {
            *cp = 0x80;
            return 1;
        }
        lead = (b >= 0x81 && b <= 0x9F) || (b >= 0xE0 && b <= 0xFC);
        break;
    case HV_CS_MB_GB18030:
        if (b == 0x80) {
            *cp = 0x20AC;
            return 1;
        }
        /* A well-formed four-byte sequence that maps to nothing is a single error. */
        if (b >= 0x81 && b <= 0xFE && n >= 4 && p[1] >= 0x30 && p[1] <= 0x39 && p[2] >= 0x81 &&
            p[2] <= 0xFE && p[3] >= 0x30 && p[3] <= 0x39)
            return 4;
        lead = b >= 0x81 && b <= 0xFE;
        break;
    case HV_CS_MB_EUC:
        lead = b >= 0x81 && b <= 0xFE;
        break;
    case HV_CS_MB_EUCJP:
        if (b == 0x8F && n >= 2 && p[1] >= 0xA1 && p[1] <= 0xFE)
            return (n >= 3 && p[2] >= 0x80) ? 3 : 2;
        lead = b == 0x8E || b == 0x8F || (b >= 0xA1 && b <= 0xFE);
        break;
    default:
        lead = 0;
        break;
    }
    return (lead && n >= 2 && p[1] >= 0x80) ? 2 : 1;
}

/*
 * Stream a multi-byte encoding through iconv. glibc stops at each invalid sequence (EILSEQ)
 * and at a sequence cut short by the end of its input (EINVAL); both become U+FFFD and
 * decoding goes on. "//IGNORE" is no help: it drops bytes silently and still reports an
 * error. Returns -1 if glibc has no such converter.
 */
static int hv_charset_mbcs_decode(const hv_charset_enc_t *enc, const char *s, size_t n,
                                  hv_charset_out_t *o)
{
    iconv_t cd = iconv_open("UTF-8", enc->iconv_name);
    if (cd == (iconv_t)-1)
        return -1;

    /* iconv() takes char ** for its input but never writes through it. */
    char *inp = (char *)(uintptr_t)s;
    size_t inleft = n;

    /* Two-byte characters mostly become three bytes; the buffer doubles if that is short. */
    hv_charset_out_reserve(o, n + n / 2 + 16);
    while (inleft > 0) {
        /* Input goes in windows: sanitizers check the whole input range on every iconv()
         * call, which a page with an error every few bytes would make quadratic. */
        size_t window = HV_MIN(inleft, (size_t)HV_CHARSET_ICONV_WINDOW);
        size_t wleft = window;
        char *outp = o->buf + o->len;
        size_t outleft = o->cap - o->len - 1;
        size_t r = iconv(cd, &inp, &wleft, &outp, &outleft);
        int err = errno;
        o->len = (size_t)(outp - o->buf);
        inleft -= window - wleft;
        if (r != (size_t)-1)
            continue; /* the window is done */
        if (err == E2BIG) {
            hv_charset_out_reserve(o, o->cap - o->len + 16);
            continue;
        }
        if (err == EINVAL && wleft == inleft) {
            /* A sequence cut short by the end of the page. */
            hv_charset_out_cp(o, HV_CHARSET_REPLACEMENT_CHAR);
            break;
        }
        if (err == EINVAL && window - wleft > 0)
            continue; /* cut short by the window: the next window starts with it */

        uint32_t cp;
        size_t bad = hv_charset_invalid_len((hv_charset_mb_t)enc->mb, (const unsigned char *)inp,
                                            inleft, &cp);
        hv_charset_out_cp(o, cp);
        inp += bad;
        inleft -= bad;
    }

    /* Return a stateful decoder to its initial state; harmless for the others. */
    for (;;) {
        hv_charset_out_reserve(o, 16);
        char *outp = o->buf + o->len;
        size_t outleft = o->cap - o->len - 1;
        size_t r = iconv(cd, NULL, NULL, &outp, &outleft);
        o->len = (size_t)(outp - o->buf);
        if (r != (size_t)-1 || errno != E2BIG)
            break;
        hv_charset_out_reserve(o, o->cap - o->len + 16);
    }
    iconv_close(cd);
    return 0;
}

/*
 * Decode [s, s+n) with `enc` into out->text/len. `keep_body` is 0 when a BOM was cut off, so
 * the body cannot be handed back as it is; `valid_utf8` is 1 when the caller already knows
 * the bytes are valid UTF-8. Returns the encoding actually used: windows-1252 when glibc
 * lacks the converter (a system without gconv modules), so that a page is still decoded.
 */
static const hv_charset_enc_t *hv_charset_run(const hv_charset_enc_t *enc, const char *s,
                                              size_t n, int keep_body, int valid_utf8,
                                              hv_charset_result_t *out)
{
    const unsigned char *u = (const unsigned char *)s;

    if (n == 0 && keep_body) {
        out->text = NULL;
        out->len = 0;
        return enc;
    }

    switch ((hv_charset_kind_t)enc->kind) {
    case HV_CS_KIND_UTF8:
        /* Declared UTF-8 is handed back unvalidated: the HTML analysis repairs what it parses,
         * which for a title is often the first few KiB of a page (see `unchecked`). */
        if (keep_body) {
            out->text = NULL;
            out->len = n;
            out->unchecked = !valid_utf8;
        } else {
            out->text = hv_utf8_sanitize(s, n, &out->len);
        }
        return enc;
    case HV_CS_KIND_UTF16LE:
    case HV_CS_KIND_UTF16BE:
        out->text = hv_charset_utf16_decode(u, n, enc->kind == HV_CS_KIND_UTF16BE, &out->len);
        return enc;
    case HV_CS_KIND_REPLACEMENT:
        /* WHATWG's decoder for ISO-2022-KR, HZ and friends: they can smuggle markup past
         * filters, so their content is never decoded. n > 0 here (no BOM names them). */
        out->text = hv_xstrndup("\xEF\xBF\xBD", 3);
        out->len = 3;
        return enc;
    case HV_CS_KIND_MBCS: {
        hv_charset_out_t o = {NULL, 0, 0};
        if (hv_charset_mbcs_decode(enc, s, n, &o) == 0) {
            out->text = hv_charset_out_finish(&o, &out->len);
            return enc;
        }
        free(o.buf);
        enc = &hv_charset_encs[HV_CS_WINDOWS_1252];
        break;
    }
    case HV_CS_KIND_WIN1252:
    case HV_CS_KIND_XUSER:
    case HV_CS_KIND_SBCS:
        break;
    }

    hv_charset_sbcs_t table;
    if (hv_charset_sbcs_build(enc, &table) != 0) {
        enc = &hv_charset_encs[HV_CS_WINDOWS_1252];
        hv_charset_sbcs_build(enc, &table);
    }
    out->text = hv_charset_sbcs_decode(&table, u, n, &out->len);
    return enc;
}

/* ---- entry points ---------------------------------------------------------------------------- */

void hv_charset_decode(const char *body, size_t len, const char *content_type,
                       hv_charset_result_t *out)
{
    const unsigned char *s = (const unsigned char *)body;
    const hv_charset_enc_t *enc;
    size_t bom = 0;
    int valid_utf8 = 0;

    memset(out, 0, sizeof(*out));
    if (body == NULL)
        len = 0;

    if ((enc = hv_charset_sniff_bom(s, len, &bom)) != NULL) {
        out->source = HV_CHARSET_FROM_BOM;
    } else if (content_type != NULL &&
               (enc = hv_charset_from_content_type(content_type)) != NULL) {
        out->source = HV_CHARSET_FROM_HEADER;
    } else if ((enc = hv_charset_prescan(s, len)) != NULL) {
        out->source = HV_CHARSET_FROM_META;
    } else {
        out->source = HV_CHARSET_FROM_DEFAULT;
        valid_utf8 = hv_utf8_valid(body, len);
        enc = &hv_charset_encs[valid_utf8 ? HV_CS_UTF_8 : HV_CS_WINDOWS_1252];
    }

    enc = hv_charset_run(enc, bom > 0 ? body + bom : body, len - bom, bom == 0, valid_utf8, out);

    size_t name_len = strnlen(enc->name, sizeof(out->name) - 1);
    memcpy(out->name, enc->name, name_len);
    out->name[name_len] = '\0';
}

void hv_charset_result_free(hv_charset_result_t *r)
{
    if (r == NULL)
        return;
    free(r->text);
    r->text = NULL;
    r->len = 0;
}

/* glibc unloads a converter module once a few others have been released, so with several
 * encodings in rotation every iconv_open would load its module from disk again. Holding one
 * descriptor per converter for the life of the process keeps them all loaded. */
static iconv_t preloaded[HV_CS_COUNT];
static int preloaded_ready;

void hv_charset_preload(void)
{
    if (preloaded_ready)
        return;
    for (int i = 0; i < HV_CS_COUNT; i++) {
        preloaded[i] = (iconv_t)-1;
        if (hv_charset_encs[i].iconv_name != NULL)
            preloaded[i] = iconv_open("UTF-8", hv_charset_encs[i].iconv_name);
    }
    preloaded_ready = 1;
}

void hv_charset_unload(void)
{
    if (!preloaded_ready)
        return;
    for (int i = 0; i < HV_CS_COUNT; i++)
        if (preloaded[i] != (iconv_t)-1)
            iconv_close(preloaded[i]);
    preloaded_ready = 0;
}
