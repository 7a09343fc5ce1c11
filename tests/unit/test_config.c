#include <string.h>
#include <uv.h>

#include "harvestd/config.h"
#include "test.h"

TEST_IMPL(config_defaults)
{
    hv_config_t c;
    hv_config_defaults(&c);
    ASSERT_EQ(32, c.concurrency);
    ASSERT_EQ(4, c.per_host);
    ASSERT_EQ(2u << 20, c.max_bytes);
    ASSERT_EQ(64u << 10, c.max_header_bytes);
    ASSERT_EQ(10, c.max_redirects);
    ASSERT_EQ(5000, c.connect_timeout_ms);
    ASSERT_EQ(15000, c.read_timeout_ms);
    ASSERT_EQ(30000, c.total_timeout_ms);
    ASSERT_EQ(200, c.flush_ms);
    ASSERT(strncmp(c.user_agent, "harvestd/", 9) == 0);
}

TEST_IMPL(config_units_and_dashes)
{
    hv_config_t c;
    char err[256];
    hv_config_defaults(&c);
    ASSERT_OK(hv_config_set(&c, "max-bytes", "64k", err, sizeof(err)));
    ASSERT_EQ(65536, c.max_bytes);
    ASSERT_OK(hv_config_set(&c, "read_timeout", "500ms", err, sizeof(err)));
    ASSERT_EQ(500, c.read_timeout_ms);
    ASSERT_OK(hv_config_set(&c, "read_timeout", "2", err, sizeof(err)));
    ASSERT_EQ(2000, c.read_timeout_ms);
    ASSERT_OK(hv_config_set(&c, "flush-ms", "50", err, sizeof(err)));
    ASSERT_EQ(50, c.flush_ms);
}

TEST_IMPL(config_rejects_bad_values)
{
    hv_config_t c;
    char err[256];
    hv_config_defaults(&c);
    ASSERT_EQ(UV_ENOENT, hv_config_set(&c, "no_such_thing", "1", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "concurrency", "12x", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "concurrency", "-1", err, sizeof(err)));
    ASSERT_EQ(UV_ERANGE, hv_config_set(&c, "concurrency", "0", err, sizeof(err)));
    ASSERT(strstr(err, "concurrency") != NULL);
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "max_bytes", "12q", err, sizeof(err)));
    ASSERT_EQ(UV_ERANGE, hv_config_set(&c, "max_bytes", "99999999999999999999", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "user_agent", "a\r\nX-Injected: 1", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "log_level", "loud", err, sizeof(err)));
    ASSERT_EQ(32, c.concurrency); /* unchanged by failures */
}
