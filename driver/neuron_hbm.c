// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Device memory (HBM) of a simulated device: a drm_mm range allocator over
 * an aperture whose pages are allocated when a job first uses them and kept
 * in an xarray, so a 96 GiB device costs nothing until used. Unpopulated
 * pages read as zero in DMA jobs.
 *
 * Pages are charged to the memory cgroup of the process that opened the
 * file whose job backs them, are allocated without any lock of ours held and
 * give up when the submitter is killed. They live exactly as long as their
 * BO: added only by a job holding it, taken out when it is freed, so memory
 * never passes from one tenant to the next unzeroed. The engine's mapping of
 * the aperture shows only those pages (anything else is SIGBUS) and only to
 * the attached engine: detaching revokes it.
 */
#include <linux/highmem.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

/* No OOM kill for the device: a clear ENOMEM to the submitter instead. */
#define NEURON_HBM_GFP (GFP_HIGHUSER | __GFP_ZERO | __GFP_ACCOUNT | \
			__GFP_RETRY_MAYFAIL | __GFP_NOWARN)

int neuron_hbm_init(struct neuron_device *ndev)
{
	struct neuron_hbm *hbm = &ndev->hbm;
	int ret;

	hbm->size = ndev->desc.hbm_size;
	mutex_init(&hbm->lock);
	mutex_init(&hbm->map_lock);
	drm_mm_init(&hbm->mm, 0, hbm->size);
	xa_init(&hbm->pages);
	drm_vma_node_reset(&hbm->vma);
	ret = drm_vma_offset_add(ndev->drm.vma_offset_manager, &hbm->vma,
				 hbm->size >> PAGE_SHIFT);
	if (ret) {
		drm_mm_takedown(&hbm->mm);
		mutex_destroy(&hbm->map_lock);
		mutex_destroy(&hbm->lock);
	}
	return ret;
}

/* Unmap [start, start + size) of the aperture from every engine mapping. */
static void neuron_hbm_unmap(struct neuron_device *ndev, u64 start, u64 size)
{
	unmap_mapping_range(ndev->drm.anon_inode->i_mapping,
			    (drm_vma_node_start(&ndev->hbm.vma) << PAGE_SHIFT) +
			    start, size, 1);
}

/*
 * Give the pages of [start, start + size) back: out of @pages under
 * map_lock (no fault maps them afterwards), out of the engine's page tables,
 * then to the system. Lock breaks keep other engine faults moving.
 */
static void neuron_hbm_drop(struct neuron_device *ndev, u64 start, u64 size)
{
	struct neuron_hbm *hbm = &ndev->hbm;
	unsigned long idx, n = 0;
	struct page *page, *tmp;
	LIST_HEAD(dead);

	neuron_might_sleep();
	mutex_lock(&hbm->map_lock);
	xa_for_each_range(&hbm->pages, idx, page, start >> PAGE_SHIFT,
			  (start + size - 1) >> PAGE_SHIFT) {
		xa_erase(&hbm->pages, idx);
		list_add(&page->lru, &dead);
		if (!(++n % 1024)) {
			mutex_unlock(&hbm->map_lock);
			cond_resched();
			mutex_lock(&hbm->map_lock);
		}
	}
	mutex_unlock(&hbm->map_lock);
	if (!n)
		return;
	neuron_hbm_unmap(ndev, start, size);
	list_for_each_entry_safe(page, tmp, &dead, lru) {
		list_del(&page->lru);
		__free_page(page);
	}
	atomic64_sub(n, &hbm->resident);
}

void neuron_hbm_fini(struct neuron_device *ndev)
{
	struct neuron_hbm *hbm = &ndev->hbm;

	neuron_hbm_drop(ndev, 0, hbm->size);
	drm_vma_offset_remove(ndev->drm.vma_offset_manager, &hbm->vma);
	xa_destroy(&hbm->pages);
	if (!drm_mm_clean(&hbm->mm))
		drm_err(&ndev->drm, "HBM ranges still allocated at teardown\n");
	drm_mm_takedown(&hbm->mm);
	mutex_destroy(&hbm->map_lock);
	mutex_destroy(&hbm->lock);
}

/**
 * neuron_hbm_alloc - allocate a page aligned range of HBM; it reads as zero
 * (a freed range has no pages left)
 * @ndev: device
 * @node: zeroed node to fill
 * @size: bytes, a multiple of PAGE_SIZE
 *
 * Return: 0 or -ENOSPC when no free range is large enough.
 */
int neuron_hbm_alloc(struct neuron_device *ndev, struct drm_mm_node *node,
		     u64 size)
{
	struct neuron_hbm *hbm = &ndev->hbm;
	int ret;

	mutex_lock(&hbm->lock);
	ret = drm_mm_insert_node_generic(&hbm->mm, node, size, PAGE_SIZE, 0,
					 DRM_MM_INSERT_BEST);
	if (!ret) {
		hbm->used += node->size;
		hbm->bo_count++;
	}
	mutex_unlock(&hbm->lock);
	return ret ? -ENOSPC : 0;
}

/* The range becomes reusable only once its pages and mappings are gone. */
void neuron_hbm_free(struct neuron_device *ndev, struct drm_mm_node *node)
{
	struct neuron_hbm *hbm = &ndev->hbm;

	neuron_might_sleep();
	neuron_hbm_drop(ndev, node->start, node->size);
	mutex_lock(&hbm->lock);
	hbm->used -= node->size;
	hbm->bo_count--;
	drm_mm_remove_node(node);
	mutex_unlock(&hbm->lock);
}

/* Back page @idx unless it is: a zeroed page charged to the active memcg. */
static int neuron_hbm_add_page(struct neuron_hbm *hbm, unsigned long idx)
{
	struct page *page, *old;

	if (xa_load(&hbm->pages, idx))
		return 0;
	page = alloc_page(NEURON_HBM_GFP);
	if (!page)
		return -ENOMEM;
	old = xa_cmpxchg(&hbm->pages, idx, NULL, page, NEURON_GFP_JOB);
	if (old) {	/* another job of the same BO was first, or no memory */
		__free_page(page);
		return xa_is_err(old) ? xa_err(old) : 0;
	}
	atomic64_inc(&hbm->resident);
	return 0;
}

/**
 * neuron_hbm_populate - back [addr, addr + len) with pages before a job
 * uses it, so that jobs never allocate while their fence is pending
 * @hbm: device memory
 * @memcg: memory cgroup to charge (the file opener's), or NULL
 * @addr: HBM address inside a BO the caller holds
 * @len: bytes, nonzero
 *
 * Holds no lock of ours across the allocations.
 *
 * Return: 0, -ENOMEM (host memory or the memcg's limit) or -EINTR when the
 * caller got a fatal signal.
 */
int neuron_hbm_populate(struct neuron_hbm *hbm, struct mem_cgroup *memcg,
			u64 addr, u64 len)
{
	unsigned long idx, last = (addr + len - 1) >> PAGE_SHIFT;
	struct mem_cgroup *old = set_active_memcg(memcg);
	int ret = 0;

	neuron_might_sleep();
	for (idx = addr >> PAGE_SHIFT; idx <= last && !ret; idx++) {
		if (fatal_signal_pending(current))
			ret = -EINTR;
		else
			ret = neuron_hbm_add_page(hbm, idx);
		cond_resched();
	}
	set_active_memcg(old);
	return ret;
}

/*
 * The copy helpers below run in DMA jobs. The ranges belong to BOs the job
 * holds, so their pages cannot go away; writes find them populated.
 */
int neuron_hbm_write(struct neuron_hbm *hbm, u64 addr, const void *src,
		     u64 len)
{
	while (len) {
		u32 off = offset_in_page(addr);
		u32 n = min_t(u64, len, PAGE_SIZE - off);
		struct page *page = xa_load(&hbm->pages, addr >> PAGE_SHIFT);

		if (!page)
			return -EIO;
		memcpy_to_page(page, off, src, n);
		addr += n;
		src += n;
		len -= n;
	}
	return 0;
}

void neuron_hbm_read(struct neuron_hbm *hbm, u64 addr, void *dst, u64 len)
{
	while (len) {
		u32 off = offset_in_page(addr);
		u32 n = min_t(u64, len, PAGE_SIZE - off);
		struct page *page = xa_load(&hbm->pages, addr >> PAGE_SHIFT);

		if (page)
			memcpy_from_page(dst, page, off, n);
		else
			memset(dst, 0, n);
		addr += n;
		dst += n;
		len -= n;
	}
}

int neuron_hbm_copy(struct neuron_hbm *hbm, u64 dst, u64 src, u64 len)
{
	while (len) {
		u32 n = min_t(u64, len, PAGE_SIZE - offset_in_page(dst));
		struct page *page = xa_load(&hbm->pages, dst >> PAGE_SHIFT);
		void *vaddr;

		if (!page)
			return -EIO;
		vaddr = kmap_local_page(page);
		neuron_hbm_read(hbm, src, vaddr + offset_in_page(dst), n);
		kunmap_local(vaddr);
		dst += n;
		src += n;
		len -= n;
	}
	return 0;
}

u64 neuron_hbm_largest_free(struct neuron_hbm *hbm)
{
	struct drm_mm_node *entry;
	u64 start, end, best = 0;

	mutex_lock(&hbm->lock);
	drm_mm_for_each_hole(entry, &hbm->mm, start, end)
		best = max(best, end - start);
	mutex_unlock(&hbm->lock);
	return best;
}

/**
 * neuron_hbm_revoke - unmap the whole aperture from the engine's mappings
 * @ndev: device whose engine has detached: no fault maps a page again
 *
 * Under map_lock, so that a fault that still saw the old engine has mapped
 * its page before the unmap, not after.
 */
void neuron_hbm_revoke(struct neuron_device *ndev)
{
	mutex_lock(&ndev->hbm.map_lock);
	neuron_hbm_unmap(ndev, 0, ndev->hbm.size);
	mutex_unlock(&ndev->hbm.map_lock);
}

/* Does the vma belong to the attached engine's file? */
static bool neuron_hbm_vma_is_engine(struct neuron_device *ndev,
				     struct vm_area_struct *vma)
{
	struct drm_file *file = vma->vm_file->private_data;
	bool engine;

	spin_lock(&ndev->engine_lock);
	engine = ndev->engine && ndev->engine == file->driver_priv;
	spin_unlock(&ndev->engine_lock);
	return engine;
}

static vm_fault_t neuron_hbm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct neuron_device *ndev = vma->vm_private_data;
	struct neuron_hbm *hbm = &ndev->hbm;
	unsigned long idx = vmf->pgoff - drm_vma_node_start(&hbm->vma);
	vm_fault_t ret = VM_FAULT_SIGBUS;
	struct page *page;

	if (idx >= hbm->size >> PAGE_SHIFT)
		return VM_FAULT_SIGBUS;
	/*
	 * Look up and map under map_lock, and check the engine after taking
	 * it: a page being freed, or a detach, then unmaps after us.
	 */
	mutex_lock(&hbm->map_lock);
	page = xa_load(&hbm->pages, idx);
	if (page && neuron_hbm_vma_is_engine(ndev, vma))
		ret = vmf_insert_pfn(vma, vmf->address, page_to_pfn(page));
	mutex_unlock(&hbm->map_lock);
	return ret;
}

static const struct vm_operations_struct neuron_hbm_vm_ops = {
	.fault = neuron_hbm_fault,
};

/**
 * neuron_hbm_mmap - map the HBM aperture into the engine's address space
 * @ndev: device
 * @vma: shared mapping starting at the aperture's fake offset
 *
 * Return: 0, or -EINVAL for a private or oversized mapping.
 */
int neuron_hbm_mmap(struct neuron_device *ndev, struct vm_area_struct *vma)
{
	if (!(vma->vm_flags & VM_SHARED) ||
	    vma_pages(vma) > ndev->hbm.size >> PAGE_SHIFT)
		return -EINVAL;
	vm_flags_set(vma, VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &neuron_hbm_vm_ops;
	vma->vm_private_data = ndev;
	return 0;
}
