/* status.c — the per-thread error message behind FC_ERR_VALUE / FC_ERR_CUDA statuses.
 * Kernel-side code never prints or exits; it records why here and returns a status. */
#include <stdarg.h>
#include <stdio.h>

#include "fc.h"

static _Thread_local char message[512];

void fc_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
}

const char *fc_error_message(void) { return message; }
