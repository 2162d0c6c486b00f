/** Tells kas (its API at `api`) of a push to `project`, as GitLab does; throws unless it answers 204. */
export async function notifyGitPush(
  api: string | undefined,
  jwt: string,
  project: { id: number | string } | { full_path: string },
): Promise<void> {
  const res = await fetch(`${api}/api/v1/notifications/git_push`, {
    method: "POST",
    body: JSON.stringify({ project }),
    headers: { "content-type": "application/json", "gitlab-kas-api-request": jwt },
  });
  if (res.status !== 204) throw new Error(`git_push answered ${res.status}: ${await res.text()}`);
}
