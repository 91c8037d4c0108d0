/*
 * Declarations of the QEMU TCG plugin API (plugin API version 1, as in
 * QEMU 7.2) for the functions perfab's plugin calls.  Debian does not
 * package QEMU's own header, so perfab declares what it uses: the QEMU
 * binary exports these symbols and resolves them when it loads the plugin.
 */
#ifndef PERFAB_QEMU_PLUGIN_API_H
#define PERFAB_QEMU_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERFAB_EXPORT __attribute__((visibility("default")))

/* API level this plugin is built against; QEMU 7.2 accepts 0..1. */
#define PERFAB_QEMU_PLUGIN_API 1

typedef uint64_t qemu_plugin_id_t;

/* What QEMU tells the plugin about the guest when installing it. */
typedef struct qemu_info_t {
    const char *target_name;        /* e.g. "x86_64" */
    struct {
        int min;                    /* oldest plugin API QEMU accepts */
        int cur;                    /* newest plugin API QEMU offers */
    } version;
    bool system_emulation;          /* true under qemu-system-* */
    union {
        struct {
            int smp_vcpus;          /* vCPUs at start */
            int max_vcpus;          /* vCPUs possible */
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;              /* a translation block being translated */
struct qemu_plugin_insn;            /* one guest instruction in that block */
struct qemu_plugin_hwaddr;          /* where a memory access went: RAM or I/O, physical address */
typedef uint32_t qemu_plugin_meminfo_t;  /* packed size/sign/endian/store bits */

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);

/* Provided by the plugin. */
extern PERFAB_EXPORT int qemu_plugin_version;
PERFAB_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                      int argc, char **argv);

/* Provided by QEMU. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
                                              void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
void qemu_plugin_outs(const char *string);

#endif
