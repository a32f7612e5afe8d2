// Where a page about one pipeline sits: Pipelines > tenant > pipeline (> the page).
import { href } from '../router';

interface Props {
  tenant: string;
  name: string;
  /** The page below the pipeline's own, if this is one. */
  page?: string;
}

export function Breadcrumb({ tenant, name, page }: Props) {
  return (
    <nav aria-label="breadcrumb">
      <ul>
        <li>
          <a href={href.pipelines}>Pipelines</a>
        </li>
        <li>{tenant}</li>
        <li>{page ? <a href={href.pipeline(tenant, name)}>{name}</a> : name}</li>
        {page && <li>{page}</li>}
      </ul>
    </nav>
  );
}
