/* The public header used from C99 through the shared library: quantize, upload, compute, free.
 * Expected values are computed by hand (see the comments); exits non-zero on any mismatch. */
#include <stdio.h>
#include <string.h>

#include "coli/coli.h"

static int failures = 0;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,   \
                    coli_last_error());                                                            \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

int main(void) {
    /* Q4, O = 2, I = 3: row 0 {-4, 3.5, 0} has its extreme -4 -> scale 0.5, codes {-8, 7, 0};
     * row 1 {2, -2, 6} has extreme 6 -> scale -0.75, codes {-8/3 -> -3, 8/3 -> 3, -8}:
     * nibbles {5, 11, 0}, bytes 0xB5 0x00. */
    const float w[6] = {-4.0f, 3.5f, 0.0f, 2.0f, -2.0f, 6.0f};
    unsigned char q[4];
    float scales[2];
    size_t wb = 0, sc = 0;
    coli_tensor t = NULL;
    coli_stats st;
    /* x = {127, -63.5, 2.5}: sx = 1, codes {127, -64, 2}. */
    const float x[3] = {127.0f, -63.5f, 2.5f};
    float y[2] = {0.0f, 0.0f};

    EXPECT(coli_abi_version() == COLI_ABI_VERSION);
    EXPECT(coli_format_sizes(COLI_FORMAT_Q4, 2, 3, 0, &wb, &sc) == COLI_OK);
    EXPECT(wb == 4 && sc == 2);
    EXPECT(coli_quantize(COLI_FORMAT_Q4, 2, 3, 0, w, q, scales) == COLI_OK);
    EXPECT(scales[0] == 0.5f && scales[1] == -0.75f);
    EXPECT(q[0] == 0xF0 && q[1] == 0x08 && q[2] == 0xB5 && q[3] == 0x00);
    EXPECT(coli_init(NULL, 0) == COLI_OK);
    EXPECT(coli_tensor_upload(&t, COLI_FORMAT_Q4, 2, 3, 0, q, scales, COLI_DEVICE_CPU) == COLI_OK);
    EXPECT(coli_stats_get(COLI_DEVICE_CPU, &st) == COLI_OK && st.tensors == 1 && st.bytes == 4 + 8);
    /* exact: row 0 acc = -1016 - 448 + 0 = -1464 -> -732; row 1 acc = -381 - 192 - 16 = -589
     * -> -589 * -0.75 = 441.75 */
    EXPECT(coli_matmul(t, y, x, 1, COLI_NUMERICS_EXACT) == COLI_OK);
    EXPECT(y[0] == -732.0f && y[1] == 441.75f);
    /* float: row 0 = -508 - 222.25 + 0 = -730.25; row 1 w = {2.25, -2.25, 6}:
     * 285.75 + 142.875 + 15 = 443.625 */
    EXPECT(coli_matmul(t, y, x, 1, COLI_NUMERICS_FLOAT) == COLI_OK);
    EXPECT(y[0] == -730.25f && y[1] == 443.625f);
    EXPECT(coli_matmul(t, y, x, 1, 9) == COLI_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(coli_last_error(), "numerics") != NULL);
    EXPECT(coli_tensor_free(t) == COLI_OK);
    EXPECT(coli_tensor_free(t) == COLI_ERR_INVALID_ARGUMENT);
    EXPECT(coli_stats_get(COLI_DEVICE_ALL, &st) == COLI_OK && st.tensors == 0 && st.bytes == 0);
    EXPECT(coli_shutdown() == COLI_OK);
    printf("C API: %d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
